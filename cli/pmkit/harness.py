# SPDX-License-Identifier: Apache-2.0
"""What the benchmark harnesses of the source tree share besides their results files (those
are pmkit.results'): the errors they stop on, the environment a measured binary runs in,
running one for its JSON line, noticing a build that changes under a run, and the progress
line on stderr. bench/run.py, bench/suite.py, bench/robust_stats.py and bench/arp/simulate.py
import it from here, as one package, rather than from each other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

# Inherited variables that would change what a run measures (crash points,
# domain, flush kind, PMDK tuning). Each variant sets its own explicitly.
SCRUBBED_ENV_PREFIXES = ("PMKIT_", "PMEM_", "PMEMOBJ_")


class HarnessError(Exception):
    """A usage or environment problem: one line for the user, exit status 2."""


class RunError(Exception):
    """A benchmark binary failed: exit status 1."""


def base_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_ENV_PREFIXES)}


def run_once(cmd: list[str], env: dict, timeout: float) -> dict:
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise RunError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}") from e
    except OSError as e:
        raise RunError(f"cannot run {cmd[0]}: {e.strerror}") from e
    if proc.returncode != 0:
        msg = proc.stderr.strip().splitlines()
        detail = msg[-1] if msg else "(no message)"
        raise RunError(f"exit {proc.returncode}: {' '.join(cmd)}: {detail}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError) as e:
        raise RunError(f"no JSON object on stdout of {' '.join(cmd)}") from e


def build_files(binary: Path, build_dir: Path) -> list[Path]:
    """The binary and the libraries it loads from the build directory (by ldd)."""
    files = [binary]
    try:
        ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    except OSError:
        ldd = ""
    for line in ldd.splitlines():
        _, arrow, rest = line.partition("=>")
        lib = Path(rest.split("(")[0].strip()) if arrow else None
        if lib and lib.is_absolute() and lib.resolve().is_relative_to(build_dir):
            files.append(lib.resolve())
    return files


def fingerprint(files: list[Path]) -> dict:
    """Size and mtime of each file: another build into the same directory during
    a run would mix two versions of the code in one set of ratios."""
    out = {}
    for f in files:
        try:
            st = f.stat()
            out[str(f)] = (st.st_size, st.st_mtime_ns)
        except OSError:
            out[str(f)] = None
    return out


def check_build(files: list[Path], built: dict, build_dir: Path) -> None:
    if fingerprint(files) != built:
        raise RunError(
            f"the build in {build_dir} changed during the run (another build?); "
            "no results written: rerun when no build is in progress"
        )


class Progress:
    """The steps of a long run on stderr, with tqdm's time elapsed and time left: a bar on a
    terminal, a line per step otherwise (a log keeps every result)."""

    def __init__(self, total: int, what: str = "") -> None:
        from tqdm import tqdm

        self.tqdm, self.total, self.done, self.t0 = tqdm, total, 0, time.monotonic()
        self.bar = (
            tqdm(total=total, desc=what or None, file=sys.stderr, dynamic_ncols=True)
            if sys.stderr.isatty()
            else None
        )

    def step(self, text: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
            if self.done >= self.total:
                self.bar.close()
            return
        head = self.tqdm.format_meter(
            self.done, self.total, time.monotonic() - self.t0,
            bar_format="[{n_fmt}/{total_fmt} {elapsed}<{remaining}]",
        )  # fmt: skip
        print(f"{head} {text}", file=sys.stderr, flush=True)
