# SPDX-License-Identifier: Apache-2.0
"""Where the pmkit command finds what the C/C++ build produced.

The build writes pmkit-paths.json (include dir, library dir, pass plugin, build dir). It is looked
for in $PMKIT_BUILD_DIR, then in the build/ folder of the checkout this package sits in, then
in <prefix>/share/pmkit of an installed copy. A missing build is an environment error (exit 2).
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
    out.append(here.parents[3] / "share" / "pmkit" / "pmkit-paths.json")
    return out


def find() -> Paths:
    for c in _candidates():
        if c.is_file():
            d = json.loads(c.read_text())
            plugin = Path(d["plugin"]) if d.get("plugin") else None
            tracelib = Path(d["tracelibdir"]) if d.get("tracelibdir") else None
            explorer = Path(d["explorer"]) if d.get("explorer") else None
            sim = Path(d["sim"]) if d.get("sim") else None
            return Paths(
                Path(d["include"]),
                Path(d["libdir"]),
                plugin,
                Path(d["bindir"]),
                tracelib,
                explorer,
                sim,
            )
    raise EnvError("no pmkit build found (looked for pmkit-paths.json); run 'make build' first")
