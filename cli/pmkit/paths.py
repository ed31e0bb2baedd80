# SPDX-License-Identifier: Apache-2.0
"""Where the pmkit command finds what the C/C++ build produced.

The build writes pmkit-paths.json (include dir, library dir, pass plugin, build dir). It is looked
for in $PMKIT_BUILD_DIR, then in the build/ folder of the checkout this package sits in, then
in PREFIX/share/pmkit of an installed copy (the package in PREFIX/share/pmkit/python; that
file's paths are relative to PREFIX). A missing build is an environment error (exit 2).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


class EnvError(Exception):
    """The environment lacks something the command needs (exit status 2)."""


@dataclass(frozen=True)
class Paths:
    include: Path
    libdir: Path
    plugin: Path | None
    bindir: Path
    tracelibdir: Path | None = None
    explorer: Path | None = None
    sim: Path | None = None
    wpplib: Path | None = None
    wppopts: Path | None = None
    modes: Path | None = None  # passes/modes.def

    def binary(self, rel: str) -> Path:
        """A program built in the build tree, e.g. 'examples/kvstore/kvstore'."""
        p = self.bindir / rel
        if not p.exists():
            raise EnvError(f"{p} is missing: run 'make build' first")
        return p


def _candidates() -> list[Path]:
    out = []
    env = os.environ.get("PMKIT_BUILD_DIR")
    if env:
        out.append(Path(env) / "pmkit-paths.json")
    here = Path(__file__).resolve()
    out.append(here.parents[2] / "build" / "pmkit-paths.json")
    # installed: PREFIX/share/pmkit/python/pmkit/paths.py, PREFIX/share/pmkit/pmkit-paths.json
    out.append(here.parents[2] / "pmkit-paths.json")
    return out


_PATHS = ("include", "libdir", "plugin", "tracelibdir", "explorer", "sim", "wpplib", "wppopts",
          "bindir", "modes")  # fmt: skip


def find() -> Paths:
    for c in _candidates():
        if c.is_file():
            d = json.loads(c.read_text())
            if d.get("relative_to") == "prefix":  # an installed copy: PREFIX/share/pmkit/
                prefix = c.resolve().parents[2]
                d = {k: str(prefix / v) if k in _PATHS and v else v for k, v in d.items()}
            opt = {k: Path(d[k]) if d.get(k) else None for k in _PATHS}
            return Paths(
                Path(d["include"]),
                Path(d["libdir"]),
                opt["plugin"],
                Path(d["bindir"]),
                opt["tracelibdir"],
                opt["explorer"],
                opt["sim"],
                opt["wpplib"],
                opt["wppopts"],
                opt["modes"],
            )
    raise EnvError("no pmkit build found (looked for pmkit-paths.json); run 'make build' first")
