# SPDX-License-Identifier: Apache-2.0
"""Runs the workload suite (bench/suite.json): every workload x variant x thread count, the
variants interleaved, and writes bench/results/suite-<date>-<commit>.json. `pmkit bench run`
calls this; `pmkit bench report` (bench/report.py) turns the newest such file into the suite's
tables and figures in docs/results.md.

For each repetition, workload and thread count, every variant runs once, in an order rotated
from one configuration to the next, so that drift on a shared machine affects all variants alike
and ratios to `volatile` can be quoted from one run. Sizes come from each workload's
workload.json: "full" (the papers' sizes) or "quick". Each run is a timed window (--seconds)
after a warm-up, on a fresh pool in a fresh directory under /dev/shm. The machine, commit, every
repetition, medians and min/max go into the JSON, written through pmkit.results. A rebuilt
binary stops the run (no results). Loading is not timed, and at full scale it takes longer than
the run: each persistent variant loads its keys once (--load-only) into a template pool, and
every run works on a copy of it (the volatile variant loads in DRAM each time).

With --against DIR (a second build, of an earlier commit say), every variant also runs from
that build, as <variant>@before, one variant at a time (a template pool per build), the two
builds back to back in an order that alternates by repetition: the file (--name compare) shows
what a change did to every variant's throughput.

Usage: python bench/suite.py [--suite ds|tx|lf|all] [--variants v1,v2] [--threads 1,2]
       [--repeat N] [--scale quick|full] [--seconds S] [--build-dir DIR] [--only NAME]
       [--against DIR]
Exit status: 0 success, 1 a run failed, 2 a usage or environment error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from pmkit import harness, results

BENCH = Path(__file__).resolve().parent
DESCRIPTION = (
    "Run every workload of bench/suite.json in every variant, the variants interleaved, and "
    "write bench/results/<name>-<date>-<commit>.json (bench/results/tmp/ with --scale quick). "
    "Exit status: 0 success, 1 a run failed, 2 a usage or environment error."
)
VARIANTS = ["volatile", "hand-adr", "hand-eadr", "pmdk"]
# Modes measured against the baselines, on request (--variants): robust = robust mode's
# default setting on the hand-adr source with its flushes compiled out; clobber and undo =
# clobber mode's settings (lock-based and transactional workloads: --suite ds,tx), each built
# for ADR and for eADR; ssapp = ssapp mode (the same workloads, eADR), ssapp-compiler = its
# RISEs ended by compiler barriers instead of sfences.
# The suffix of a variant run from the --against build.
BEFORE = "@before"
MODE_VARIANTS = ["robust", "robust-opt", "robust-flit",
                 "clobber-adr", "clobber-eadr", "undo-adr", "undo-eadr",
                 "ssapp", "ssapp-compiler"]  # fmt: skip
# What a results file is about, by --name: the baselines, or one mode against its baseline.
DESCRIPTIONS = {
    "suite": "Median throughput of every workload of bench/suite.json in each variant "
    "(operations per second over a timed window), the baseline every pmkit mode is "
    "measured against.",
    "robust": "Robust mode (flushes and fences inserted by the compiler, setting base, "
    "whole-program analysis) against the hand-placed flushes of hand-adr, on every workload "
    "of bench/suite.json.",
    "clobber": "Clobber mode (each operation one failure-atomic function: clobber logging and "
    "re-execution) against PMDK transactions, undo logging of every write (the undo setting) "
    "and the hand-written variants, for ADR and eADR, on the lock-based and transactional "
    "workloads of bench/suite.json.",
    "compare": "Every variant built from two commits and run interleaved: this build's "
    "binaries against those of an earlier one (<variant>@before), so that the ratio of the two "
    "shows what the change between them did to throughput.",
    "ssapp": "SSAPP mode (each operation one failure-atomic function, resumed after a crash) "
    "against clobber mode, PMDK transactions, the hand-written variant and volatile, all for "
    "eADR, on the lock-based and transactional workloads of bench/suite.json; with sfences "
    "or compiler barriers ending its RISEs.",
}


def int_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1: {text}")
    return out


def workloads(suite: str, only: str | None) -> list[tuple[str, str]]:
    """The workloads of `suite`: all, one group of suite.json, or several (ds,tx)."""
    suites = json.loads((BENCH / "suite.json").read_text())["suites"]
    wanted = list(suites) if suite == "all" else suite.split(",")
    for w in wanted:
        if w not in suites:
            raise harness.HarnessError(f"unknown suite {w} (choose from all, {', '.join(suites)})")
    out = [(s, n) for s, names in suites.items() if s in wanted for n in names]
    if only:
        out = [(s, n) for s, n in out if n == only]
        if not out:
            raise harness.HarnessError(f"no workload {only} in the chosen suite")
    return out


def size_args(meta: dict, scale: str) -> list[str]:
    sizes = meta.get(scale) or meta.get("full") or {}
    out = []
    for k, v in sizes.items():
        out += [f"--{k.replace('_', '-')}", str(v)]
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of a suite run: this script's and `pmkit bench run`'s (one definition)."""
    suites = list(json.loads((BENCH / "suite.json").read_text())["suites"])
    ap.add_argument("--suite", default="all", metavar="S[,S...]",
                    help=f"workload groups: all (the default) or {', '.join(suites)}, "
                    "comma-separated")  # fmt: skip
    ap.add_argument("--only", metavar="NAME", help="only this workload of the chosen groups")
    ap.add_argument("--variants", default=",".join(VARIANTS), metavar="V[,V...]",
                    help=f"builds to compare (default {','.join(VARIANTS)}; also "
                    f"{', '.join(MODE_VARIANTS)})")  # fmt: skip
    ap.add_argument(
        "--name", choices=sorted(DESCRIPTIONS), default="suite",
        help="what the results file is about (its name and report section; default suite, "
        "compare with --against)",
    )  # fmt: skip
    ap.add_argument("--threads", type=int_list, default=[1, 2], metavar="N[,N...]",
                    help="thread counts (default 1,2)")  # fmt: skip
    ap.add_argument(
        "--repeat",
        type=int,
        default=5,
        metavar="N",
        help="repetitions of every configuration, interleaved (default 5)",
    )
    ap.add_argument("--scale", choices=["quick", "full"], default="full",
                    help="workload sizes: the papers' (full, the default) or small ones "
                    "(quick; results go to bench/results/tmp/)")  # fmt: skip
    ap.add_argument(
        "--seconds",
        type=float,
        metavar="S",
        help="timed window of each run (default 1, 0.3 with --scale quick)",
    )
    ap.add_argument(
        "--build-dir",
        type=Path,
        default=BENCH.parent / "build",
        metavar="DIR",
        help="the CMake build to take the benchmark binaries from (default build/)",
    )
    ap.add_argument(
        "--against",
        type=Path,
        metavar="DIR",
        help=f"a second CMake build (of an earlier commit): every variant also runs from it, "
        f"as <variant>{BEFORE}, beside this build's",
    )
    ap.add_argument(
        "--results-dir",
        type=Path,
        default=BENCH / "results",
        metavar="DIR",
        help="where the results file goes (default bench/results/)",
    )


def run(args: argparse.Namespace) -> int:
    """A suite run with parsed options. Exit status: 0 success, 1 a run failed, 2 a usage or
    environment error."""
    try:
        return run_suite(args)
    except harness.HarnessError as e:
        print(f"pmkit bench run: {e}", file=sys.stderr)
        return 2
    except harness.RunError as e:
        print(f"pmkit bench run: a run failed: {e}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/suite.py", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv))


def run_one(b: Path, key: str, sizes: list[str], threads: int, seconds: float, templates: Path,
            env: dict, loads: dict) -> tuple[list[str], dict]:  # fmt: skip
    """One timed run of binary b on a fresh pool: a copy of the loaded template of variant key
    (made on first use, not timed), or for volatile a fresh load in DRAM."""
    pool_dir = Path(tempfile.mkdtemp(prefix=f"pmkit-suite-{b.name}-", dir="/dev/shm"))
    cmd = [
        str(b), *sizes, "--threads", str(threads), "--seconds", str(seconds),
        "--warmup", str(min(0.2, seconds / 2)),
    ]  # fmt: skip
    try:
        if b.name.endswith("-volatile"):
            cmd += ["--pool-dir", str(pool_dir)]
        else:
            t = templates / f"{key}.pool"
            if not t.exists():
                r = harness.run_once([str(b), *sizes, "--pool", str(t), "--load-only"], env, 3600)
                loads[key] = r["load_seconds"]
            shutil.copyfile(t, pool_dir / "run.pool")
            cmd += ["--pool", str(pool_dir / "run.pool")]
        return cmd, harness.run_once(cmd, env, 120 + 20 * seconds)
    finally:
        shutil.rmtree(pool_dir, ignore_errors=True)


def run_suite(args: argparse.Namespace) -> int:
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS + MODE_VARIANTS]
    if unknown:
        raise harness.HarnessError(
            f"unknown variant {unknown[0]} (choose from {VARIANTS + MODE_VARIANTS})"
        )
    seconds = args.seconds or (1.0 if args.scale == "full" else 0.3)
    chosen = workloads(args.suite, args.only)
    if not chosen:
        raise harness.HarnessError("the suite has no workloads yet")
    # The builds: this one, and --against's (its variants named <variant>@before).
    builds = {"": args.build_dir}
    if args.against:
        if not (args.against / "CMakeCache.txt").exists():
            raise harness.HarnessError(f"{args.against} is not a CMake build (no CMakeCache.txt)")
        if args.against.resolve() == args.build_dir.resolve():
            raise harness.HarnessError("--against names the build being measured")
        builds[BEFORE] = args.against
    if args.against and args.name not in ("suite", "compare"):
        raise harness.HarnessError(f"--against writes a compare file, not --name {args.name}")
    if args.name == "compare" and not args.against:
        raise harness.HarnessError("--name compare needs --against DIR, the build to compare to")
    name_of = "compare" if args.against else args.name
    binaries, files, metas = {}, {s: [] for s in builds}, {}
    per = {}  # the variants each workload has: clobber mode's need locks (not lock-free)
    for _, name in chosen:
        metas[name] = json.loads((BENCH / name / "workload.json").read_text())
        per[name] = [
            v for v in variants
            if not (metas[name]["suite"] == "lf" and v.startswith(("clobber", "undo")))
        ]  # fmt: skip
        for v in per[name]:
            for suffix, build in builds.items():
                b = build / "bench" / name / f"bench_{name}-{v}"
                if not b.exists():
                    raise harness.HarnessError(f"{b} is missing: build first (make build)")
                binaries[name, v + suffix] = b
                files[suffix] += harness.build_files(b, build)
    built = {s: harness.fingerprint(f) for s, f in files.items()}

    def check_builds() -> None:
        for s, build in builds.items():
            harness.check_build(files[s], built[s], build)

    env = harness.base_env()
    configs = [(s, n, t) for s, n in chosen for t in args.threads]
    total = args.repeat * len(builds) * sum(len(args.threads) * len(per[n]) for _, n in chosen)
    bar = harness.Progress(total, name_of)
    print(
        f"pmkit bench run: {len(chosen)} workload(s) x {len(args.threads)} thread count(s) x "
        f"{len(variants)} variants" + (" x 2 builds" if args.against else "")
        + f" x {args.repeat} repetitions = {total} runs of {seconds} s",
        file=sys.stderr,
    )  # fmt: skip
    # The commit the binaries were built from and the machine's load: read before the runs,
    # so that neither a commit made while they run nor their own load is credited to them.
    rec = results.start(name_of, args.build_dir)
    against = {}
    if args.against:
        against = {"build_dir": str(args.against.resolve()), "suffix": BEFORE,
                   "commit": results.build_commit(args.against)}  # fmt: skip
    runs, loads = [], {}
    templates = Path(tempfile.mkdtemp(prefix="pmkit-suite-templates-", dir="/dev/shm"))
    try:
        # One workload at a time, so that only its templates occupy /dev/shm (a loaded pool
        # at full scale is more than a GiB); the variants are interleaved within it. Against
        # another build, one variant at a time, its two builds back to back, the order
        # alternating by repetition and thread count: twice the templates of every variant
        # would not fit in memory, and what is compared is a variant with itself.
        for wi, (suite, name) in enumerate(chosen):
            groups = [[v] for v in per[name]] if args.against else [per[name]]
            for vs in groups:
                for rep in range(args.repeat):
                    for ti, threads in enumerate(args.threads):
                        shift = (rep + ti + wi) % len(vs)
                        pair = list(builds) if (rep + ti) % 2 == 0 else list(builds)[::-1]
                        order_list = [v + s for v in vs[shift:] + vs[:shift] for s in pair]
                        for order, v in enumerate(order_list):
                            check_builds()
                            cmd, result = run_one(
                                binaries[name, v], v, size_args(metas[name], args.scale),
                                threads, seconds, templates, env, loads,
                            )  # fmt: skip
                            bar.step(
                                f"rep {rep + 1}/{args.repeat} {name} threads={threads} {v}: "
                                f"{result['ops_per_sec'] / 1e6:.3g} Mops/s",
                            )  # fmt: skip
                            runs.append(
                                {"repetition": rep, "order": order,
                                 "config": {"workload": name, "threads": threads},
                                 "variant": v, "suite": suite, "command": cmd[1:],
                                 "result": result}
                            )  # fmt: skip
                for t in templates.iterdir():
                    t.unlink()
    finally:
        shutil.rmtree(templates, ignore_errors=True)
    check_builds()
    medians = []
    for suite, name, threads in configs:
        config = {"workload": name, "threads": threads}
        for v in [v + s for v in per[name] for s in builds]:
            xs = [r["result"][results.SUITE_METRIC["field"]] for r in runs
                  if r["config"] == config and r["variant"] == v]  # fmt: skip
            medians.append({"config": config, "variant": v, "suite": suite, **results.summary(xs)})
    doc = rec.document(
        "runs",
        DESCRIPTIONS[name_of],
        {
            "suite": args.suite,
            "variants": [{"name": v + s} for v in variants for s in builds],
            **({"against": against} if against else {}),
            "axes": {"workload": [n for _, n in chosen], "threads": args.threads},
            "metric": results.SUITE_METRIC,
            "repetitions": args.repeat,
            "scale": args.scale,
            "seconds": seconds,
            "workloads": {n: metas[n] for _, n in chosen},
        },
        quick=args.scale == "quick",
        load_seconds=loads,
        runs=runs,
        medians=medians,
    )
    out_dir = args.results_dir if args.scale == "full" else args.results_dir / "tmp"
    stamp = rec.started.strftime("%Y%m%d-%H%M%S")
    out = out_dir / f"{name_of}-{stamp}-{rec.commit.get('sha', 'unknown')[:12]}.json"
    results.write(doc, out)
    print(f"pmkit bench run: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
