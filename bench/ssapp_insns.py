# SPDX-License-Identifier: Apache-2.0
"""Instructions per operation of SSAPP mode against the hand-written and other variants (the
SSAPP paper's count against Mirror): writes bench/results/ssapp-insns.json, which
bench/report.py turns into a section of docs/results.md.

Hardware counters are not always there (virtual machines), so the count is valgrind's: each
binary runs under callgrind twice on a fresh pool, with N and 2N operations on one thread, and
the difference of the instructions executed, over N, is the cost of an operation (loading the
keys, creating the pool and the rest cancel out). Deterministic, unlike a timing. The file is
written through pmkit.results (its workloads layout).

Usage: python bench/ssapp_insns.py [--build-dir DIR] [--ops N] [--only NAME] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from pmkit import results

BENCH = Path(__file__).resolve().parent
# (pmdk is left out: libpmemobj refuses to run under valgrind this way.)
VARIANTS = ["volatile", "hand-eadr", "clobber-eadr", "ssapp", "ssapp-compiler"]
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def stripped(binary: Path, work: Path) -> Path:
    """A copy without debug information, which Debian 12's valgrind cannot read from clang-16
    (DWARF 5); libpmkit likewise, found first through LD_LIBRARY_PATH (the binaries' RUNPATH
    comes after it)."""
    lib = work / "lib"
    if not lib.exists():
        lib.mkdir()
        built = list((binary.parents[2] / "runtime").glob("libpmkit.so*"))  # build/runtime
        real = [so for so in built if so.is_file() and not so.is_symlink()]
        if len(real) != 1:
            raise SystemExit(f"ssapp_insns: expected one libpmkit in {binary.parents[2]}/runtime, "
                             f"found {[so.name for so in real]}")  # fmt: skip
        for name in {so.name for so in built}:  # each name the binaries may ask for
            subprocess.run(["objcopy", "--strip-debug", str(real[0]), str(lib / name)],
                           check=True)  # fmt: skip
    out = work / binary.name
    subprocess.run(["objcopy", "--strip-debug", str(binary), str(out)], check=True)
    return out


def instructions(binary: Path, keys: int, ops: int, work: Path) -> int:
    pool = work / "insns.pool"
    pool.unlink(missing_ok=True)
    r = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         str(stripped(binary, work)),
         "--keys", str(keys), "--ops", str(ops), "--threads", "1", "--pool", str(pool)],
        capture_output=True, text=True, timeout=1800,
        env={**os.environ, "LD_LIBRARY_PATH": str(work / "lib")},
    )  # fmt: skip
    pool.unlink(missing_ok=True)
    m = COLLECTED.search(r.stderr)
    if r.returncode or not m:
        raise SystemExit(f"ssapp_insns: {binary.name} failed: {r.stderr.strip()[-400:]}")
    return int(m.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", type=Path, default=BENCH.parent / "build")
    ap.add_argument("--ops", type=int, default=5000, help="N: runs of N and 2N operations")
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--only", help="one workload")
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "ssapp-insns.json",
                    help="where the JSON goes (default: %(default)s)")  # fmt: skip
    args = ap.parse_args(argv)
    suites = json.loads((BENCH / "suite.json").read_text())["suites"]
    names = [args.only] if args.only else [n for s in ("ds", "tx", "lf") for n in suites[s]]
    rows = []
    rec = results.start("ssapp-insns", args.build_dir)
    with tempfile.TemporaryDirectory(prefix="pmkit-insns-", dir="/dev/shm") as w:
        work = Path(w)
        for name in names:
            lf = json.loads((BENCH / name / "workload.json").read_text())["suite"] == "lf"
            row = {"workload": name, "insns_per_op": {}}
            for v in VARIANTS:
                if lf and v.startswith("clobber"):
                    continue
                b = args.build_dir / "bench" / name / f"bench_{name}-{v}"
                one = instructions(b, args.keys, args.ops, work)
                two = instructions(b, args.keys, 2 * args.ops, work)
                row["insns_per_op"][v] = round((two - one) / args.ops, 1)
                print(f"{name} {v}: {row['insns_per_op'][v]} instructions per operation",
                      file=sys.stderr)  # fmt: skip
            rows.append(row)
    doc = rec.document(
        "workloads",
        "Instructions per operation (valgrind's count, one thread) of SSAPP mode against the "
        "hand-written, clobber-mode and volatile variants.",
        {
            "ops": args.ops,
            "keys": args.keys,
            "variants": [{"name": v} for v in VARIANTS],
            "repetitions": 1,
        },
        runs=rows,
    )
    out = results.write(doc, args.out)
    print(f"ssapp_insns: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
