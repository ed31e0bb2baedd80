# SPDX-License-Identifier: Apache-2.0
"""Robust mode's analysis cost and what it inserts, per workload (the PMRobust paper's Table I
and its counts): writes bench/results/robust-analysis.json, which bench/report.py turns into a
section of docs/results.md.

For every workload of bench/suite.json, from an existing build:
- analysis time, per setting (base, opt, flit): `opt` running internalize, pmkit-annotations and
  pmkit-robust on the linked whole-program bitcode of bench_<name>-robust, minus the same without
  pmkit-robust (median of 5 runs each);
- code size: non-blank lines of the workload's sources plus the shared driver, its pmkit backend
  and bench.h;
- static counts: flush and fence sites in the binaries -- calls of pmkit_flush / pmkit_fence /
  pmkit_persist in bench_<name>-hand-adr; clwb, sfence and calls of __pmkit_flush_range in
  bench_<name>-robust, -robust-opt and -robust-flit;
- dynamic counts: flush and fence events per operation in a short traced run (pmkit explore
  --dump) of bench_<name>-hand-adr-traced and of each setting's -traced build. Fence events
  include locked instructions (FliT's counter updates among them).

The file is written through pmkit.results (its workloads layout).

Usage: python bench/robust_stats.py [--build-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pmkit import results
from pmkit.harness import Progress

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PASSES = "internalize,pmkit-annotations"
# The shared files a robust build compiles besides the workload's: the driver, bench.h, and the
# backend of the hand variants and robust mode (bench/common/CMakeLists.txt: bench_backend pmkit).
ROBUST_COMMON = ["driver.c", "bench.h", "backend.h", "backend_pmkit.c", "pool.c", "defer.c",
                 "defer.h"]  # fmt: skip
# Robust mode's settings and the bench variants built with them.
SETTINGS = [("base", "robust"), ("opt", "robust-opt"), ("flit", "robust-flit")]


def opt_seconds(build: Path, bc: Path, passes: str, extra: list[str] | None = None) -> float:
    cmd = [
        "opt-16", f"-load-pass-plugin={build / 'passes' / 'pmkit-passes.so'}",
        f"-passes={passes}", "-internalize-public-api-list=main", *(extra or []), str(bc),
        "-o", "/dev/null",
    ]  # fmt: skip
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def disasm_counts(binary: Path, patterns: dict[str, str]) -> dict[str, int]:
    text = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(binary)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return {k: len(re.findall(p, text)) for k, p in patterns.items()}


def per_op(build: Path, traced: Path, meta: dict) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        out = subprocess.run(
            [str(build / "explorer" / "pmkit-explore"), "--dump", "--", str(traced),
             "--keys", str(meta["explore_keys"]), "--ops", "200", "--pool", f"{tmp}/p.pool"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
    ops = len(re.findall(r" mark-begin ", out))
    return {
        "ops": ops,
        "flushes_per_op": len(re.findall(r" flush ", out)) / max(ops, 1),
        "fences_per_op": len(re.findall(r" fence ", out)) / max(ops, 1),
    }


def source_lines(paths: list[Path]) -> int:
    return sum(1 for p in paths for ln in p.read_text().splitlines() if ln.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", type=Path, default=REPO / "build")
    args = ap.parse_args()
    build = args.build_dir
    suites = json.loads((BENCH / "suite.json").read_text())["suites"]
    names = [n for ws in suites.values() for n in ws]
    rec = results.start("robust-analysis", build)
    runs = []
    bar = Progress(len(names), "robust-analysis")
    for name in names:
        d = build / "bench" / name
        bc = d / "robust" / "linked.bc"
        for f in (bc, d / f"bench_{name}-robust", d / f"bench_{name}-hand-adr"):
            if not f.exists():
                print(f"robust_stats.py: {f} is missing: build first (make build)", file=sys.stderr)
                return 2
        meta = json.loads((BENCH / name / "workload.json").read_text())
        without = opt_seconds(build, bc, PASSES)
        srcs = [p for p in (BENCH / name).iterdir() if p.suffix in (".c", ".h")]
        srcs += [BENCH / "common" / f for f in ROBUST_COMMON]
        hand = disasm_counts(d / f"bench_{name}-hand-adr", {
            "flush_calls": r"call\s+\S+\s+<pmkit_flush@plt>",
            "fence_calls": r"call\s+\S+\s+<pmkit_fence@plt>",
            "persist_calls": r"call\s+\S+\s+<pmkit_persist@plt>",
        })  # fmt: skip
        settings = {}
        for setting, variant in SETTINGS:
            with_pass = opt_seconds(
                build, bc, f"{PASSES},pmkit-robust", [f"-pmkit-robust-setting={setting}"]
            )
            settings[setting] = {
                "analysis_seconds": max(0.0, with_pass - without),
                "opt_seconds": with_pass,
                "static": disasm_counts(
                    d / f"bench_{name}-{variant}",
                    {
                        "clwb": r"\sclwb\s",
                        "sfence": r"\ssfence\b",
                        "range_calls": r"call\s+\S+\s+<__pmkit_flush_range@plt>",
                    },
                ),  # fmt: skip
                "dynamic": per_op(build, d / f"bench_{name}-{variant}-traced", meta),
            }
        run = {
            "workload": name,
            "source_lines": source_lines(srcs),
            "hand_static": hand,
            "hand_dynamic": per_op(build, d / f"bench_{name}-hand-adr-traced", meta),
            "settings": settings,
        }
        runs.append(run)
        ms = max(v["analysis_seconds"] for v in settings.values()) * 1e3
        bar.step(f"{name}: analysis at most {ms:.1f} ms")
    doc = rec.document(
        "workloads",
        "Robust mode's analysis time, code size and the flushes and fences it inserts, against "
        "the hand-placed ones of hand-adr, per workload.",
        {"repetitions_of_opt": 5, "dynamic_ops": 200, "common_sources": ROBUST_COMMON},
        runs=runs,
    )
    out = results.write(doc, BENCH / "results" / "robust-analysis.json")
    print(f"robust_stats.py: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
