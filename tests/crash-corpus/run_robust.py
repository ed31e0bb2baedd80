# SPDX-License-Identifier: Apache-2.0
"""Robust mode's end-to-end test on the crash corpus: for every program, its fixed source with
its own flushes and fences stripped is built four times (tests/crash-corpus/CMakeLists.txt):

- <prog>-robust, <prog>-robust-opt, <prog>-robust-flit: robust mode derives the flushes and
  fences again, in its base, opt and flit settings;
- <prog>-stripped: nothing is inserted (the program as robust mode's user writes it).

Each is explored under the x86-line model with --robustness (the checker records its reads):
robust mode, as PMRobust, relies on the stores to one cache line persisting in order. Robust
mode passes if every robust build explores clean (no inconsistent image, no image strict
persistency could not produce) and every <prog>-stripped fails (the oracle bites). Prints a table;
exit 0 if all hold, 1 if not, 2 on a usage error. Usage: run_robust.py BUILD_DIR [--only PROG]...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMEOUT = 300
ROBUSTNESS_RE = re.compile(r"robustness: (\d+) of (\d+) crash images")


def explore(bindir: Path, exe: str, build: Path, stop: bool) -> tuple[int, str, str]:
    """Explore `exe`; with `stop` (a must-fail build), only until an image fails."""
    with tempfile.TemporaryDirectory(prefix=f"robust-{exe}-", dir="/dev/shm") as tmp:
        prog = str(bindir / exe)
        cmd = [
            sys.executable, "-m", "pmkit", "explore", "--model", "x86-line", "--robustness",
            "--jobs", "2", "--no-progress", "--save-dir", f"{tmp}/failures", "--per-point", "64",
            *(["--stop-after", "1"] if stop else []),
            "--check", f"{prog} check {{pool}}", "--", prog, "run", f"{tmp}/pool",
        ]  # fmt: skip
        env = dict(os.environ, PMKIT_BUILD_DIR=str(build))
        env.pop("PMKIT_TRACE", None)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
            out = r.stdout + r.stderr
            status = r.returncode
        except subprocess.TimeoutExpired:
            return -1, "timeout", ""
    m = ROBUSTNESS_RE.search(out)
    return status, f"{m.group(1)}/{m.group(2)}" if m else "?", out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--only", action="append", default=[], metavar="PROG")
    args = ap.parse_args()
    programs = [p["program"] for p in json.loads((HERE / "corpus.json").read_text())["programs"]]
    if args.only:
        unknown = set(args.only) - set(programs)
        if unknown:
            print(
                f"run_robust.py: not in corpus.json: {', '.join(sorted(unknown))}", file=sys.stderr
            )
            return 2
        programs = [p for p in programs if p in args.only]
    bindir = args.build / "tests" / "crash-corpus"
    print(
        f"{'program':<20}  {'build':<11}  {'expected':<8}  {'got':<8}  {'non-robust':>10}  seconds"
    )
    bad = 0
    for prog in programs:
        for kind, expected in (
            ("robust", 0), ("robust-opt", 0), ("robust-flit", 0), ("stripped", 1),
        ):  # fmt: skip
            exe = f"{prog}-{kind}"
            if not (bindir / exe).is_file():
                print(f"run_robust.py: {bindir / exe} is missing: build the robust-corpus target")
                return 1
            t0 = time.monotonic()
            status, nonrobust, out = explore(bindir, exe, args.build, expected == 1)
            got = {0: "pass", 1: "fail"}.get(status, f"error({status})")
            want = "pass" if expected == 0 else "fail"
            line = f"{prog:<20}  {kind:<11}  {want:<8}  {got:<8}  {nonrobust:>10}  "
            line += f"{time.monotonic() - t0:7.2f}"
            if got != want:
                bad += 1
                line += "  <-- MISMATCH"
            print(line, flush=True)
            if got != want and status not in (0, 1):
                print(out)
    print(f"run_robust.py: {bad} mismatch(es)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
