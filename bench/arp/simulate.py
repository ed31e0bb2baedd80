# SPDX-License-Identifier: Apache-2.0
"""The arp simulator campaign: the paper's Table 5, Figure 4 and Figure 5 from our own traces.

For each repetition and each workload of arp_bench it records a fresh trace of the workload
(arp_bench-traced: 8 workers, the work allocator, 2 antagonists; the seed is the repetition), runs
pmkit-sim on it under every model (--mark arp-run: the measured phase only) and keeps each model's
numbers. It writes bench/results/arpsim.json (bench/results/tmp/ with --quick) through
pmkit.results, in the runs layout of bench/run.py's files, a model being a variant and a workload a
configuration, so that bench/report.py renders it beside the other benchmarks.

Usage: python bench/arp/simulate.py [--quick] [--ops N] [--repetitions N] [--machine pcm|optane]
       [--build-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pmkit import results
from pmkit.harness import Progress, base_env

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent

WORKLOADS = ["cq", "pc", "sps", "tatp", "tpcc", "ycsb"]
MODELS = ["scp", "rcbsp", "arp", "arp+va", "ideal"]
DESCRIPTIONS = {
    "scp": "sequentially consistent persists: every store its own epoch",
    "rcbsp": "ARP compiled to RCBSP: every acquire, release and sequence point a full barrier",
    "arp": "one-way acquire and release barriers at the controller (Algorithm 1)",
    "arp+va": "ARP with volatile annotations: volatile syncs never reach the controller",
    "ideal": "limit study: 64 persists per epoch, no ordering",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke test: short, one repetition")
    ap.add_argument("--ops", type=int, default=20000, help="tasks per run (default 20000)")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--machine", default="pcm", choices=["pcm", "optane"])
    ap.add_argument("--build-dir", default=str(BENCH.parent / "build"))
    args = ap.parse_args(argv)
    if args.quick:
        args.ops, args.repetitions = 2000, 1
    build = Path(args.build_dir)
    traced, sim = build / "bench/arp/arp_bench-traced", build / "sim/pmkit-sim"
    for f in (traced, sim):
        if not f.exists():
            print(f"simulate.py: {f} is not built: run 'make build'", file=sys.stderr)
            return 2
    rec = results.start("arpsim", build)
    runs = []
    bar = Progress(args.repetitions * len(WORKLOADS), "arpsim")
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    with tempfile.TemporaryDirectory(dir=shm, prefix="pmkit-arpsim-") as work:
        for rep in range(args.repetitions):
            for w in WORKLOADS:
                trace, out = Path(work) / f"{w}.trace", Path(work) / f"{w}.json"
                env = dict(base_env(), PMKIT_TRACE=str(trace))
                cmd = [str(traced), w, "--ops", str(args.ops), "--seed", str(rep + 1),
                       "--pool", f"{work}/{w}.pool", "--pool-mib", "512"]  # fmt: skip
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
                if r.returncode:
                    print(f"\nsimulate.py: {' '.join(cmd)} failed:\n{r.stderr}", file=sys.stderr)
                    return 1
                workload_run = json.loads(r.stdout.strip().splitlines()[-1])
                s = subprocess.run(
                    [str(sim), "--mark", "arp-run", "--background", "arp-background",
                     "--model", ",".join(MODELS),
                     "--machine", args.machine, "--json", str(out), str(trace)],
                    capture_output=True, text=True, timeout=1800,
                )  # fmt: skip
                if s.returncode:
                    print(f"\nsimulate.py: pmkit-sim failed on {w}:\n{s.stderr}", file=sys.stderr)
                    return 1
                res = json.loads(out.read_text())
                for m in res["models"]:
                    runs.append({
                        "repetition": rep,
                        "config": {"workload": w},
                        "variant": m["model"],
                        "result": {**m, "trace_events_mib": trace.stat().st_size / 2**20,
                                   "real_seconds": workload_run["seconds"]},
                    })  # fmt: skip
                trace.unlink()
                Path(f"{work}/{w}.pool").unlink(missing_ok=True)
                bar.step(f"rep {rep + 1}/{args.repetitions} {w}: simulated under every model")
    medians = []
    for w in WORKLOADS:
        for m in MODELS:
            xs = [r["result"]["time_ps"] for r in runs
                  if r["config"]["workload"] == w and r["variant"] == m]  # fmt: skip
            medians.append({"config": {"workload": w}, "variant": m, **results.summary(xs)})
    doc = rec.document(
        "runs",
        (
            "The persist-ordering simulator (pmkit-sim) on traces of the six arp workloads, as "
            "in the paper's section 6: 8 workers, a work allocator handing tasks through "
            "volatile queues, 2 antagonists on a volatile lock. Each repetition records a new "
            f"trace ({args.ops} tasks, seed = repetition) and simulates it under every model "
            f"on the {args.machine} machine; ratios are of the same trace."
        ),
        {
            "repetitions": args.repetitions,
            "seconds": None,
            "axes": {"workload": WORKLOADS},
            "constants": {
                "ops": args.ops,
                "workers": 8,
                "antagonists": 2,
                "sim_machine": args.machine,
            },  # fmt: skip
            "variants": [{"name": m, "description": DESCRIPTIONS[m]} for m in MODELS],
            "metric": {"field": "time_ps", "unit": "simulated ps", "higher_is_better": False},
            "binary": "bench/arp/arp_bench-traced + sim/pmkit-sim",
            "args": [],
        },
        quick=args.quick,
        notes=[
            "A persist is a store (8 bytes), as in the paper; persists per epoch count the "
            "stores between epoch boundaries at the controller.",
            "Every traced event costs a core 25 cycles at 2 GHz (pmkit-sim --event-cycles); "
            "docs/modes/arp.md lists every timing parameter and its source.",
        ],
        runs=runs,
        medians=medians,
    )
    out_dir = BENCH / "results" / "tmp" if args.quick else BENCH / "results"
    path = results.write(doc, out_dir / "arpsim.json")
    print(f"simulate.py: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
