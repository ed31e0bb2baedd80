# SPDX-License-Identifier: Apache-2.0
"""The one benchmark harness: runs bench/<name>/ as its meta.json describes, writes JSON.

A benchmark folder holds a meta.json naming a binary (relative to the build
directory), an argument template, parameter axes, constants, variants (each
with extra arguments and environment, and optionally a binary of its own and
files whose sizes to record), the metric field of the binary's one-line JSON
output, repetitions and seconds per run (or none, for a benchmark that does a
fixed amount of work per run; "timeout" then bounds a run). Templates are
Python format strings over the parameters, the constants, `seconds`,
`build_dir` and `pool_dir` (a fresh directory per run, removed after it): in
the arguments (the variants' too), in the variants' environment values and
in their file paths. The harness
runs every (repetition, configuration, variant) with the variants
interleaved: for each repetition and configuration, every variant in turn,
the order rotated from one configuration to the next, so that drift on a
shared machine affects all variants alike and their ratios can be quoted
from one run. It writes
bench/results/<name>.json (bench/results/tmp/<name>.json with --quick) through
pmkit.results (cli/pmkit/results.py), holding the machine, the git commit, the
date, the parameters, every repetition and the medians. Inherited PMKIT_*,
PMEM_* and PMEMOBJ_* variables are dropped so that only the variants' own
settings apply, and a run stops without writing
anything if a variant's binary or its libraries in the build directory change
under it (another build). bench/report.py turns the JSON into docs/results.md.

Usage: python bench/run.py [NAME ...] [--quick] [--build-dir DIR] [--repetitions N]
       [--seconds S] [--pool-dir DIR]
Exit status: 0 on success, 1 if a run failed, 2 on a usage or environment error.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pmkit import results
from pmkit.harness import (
    SCRUBBED_ENV_PREFIXES,
    HarnessError,
    Progress,
    RunError,
    base_env,
    build_files,
    check_build,
    fingerprint,
    run_once,
)

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"


def list_benchmarks() -> list[str]:
    return sorted(p.parent.name for p in BENCH_DIR.glob("*/meta.json"))


def load_meta(name: str) -> dict:
    path = BENCH_DIR / name / "meta.json"
    if not path.is_file():
        known = ", ".join(list_benchmarks()) or "none"
        raise HarnessError(f"no benchmark {name!r} (no {path}); known: {known}")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise HarnessError(f"{path}: invalid JSON: {e}") from e
    for key in ("binary", "args", "metric", "axes", "variants", "repetitions"):
        if key not in meta:
            raise HarnessError(f"{path}: missing key {key!r}")
    return meta


def effective_params(meta: dict, args: argparse.Namespace) -> dict:
    """Axes, constants, repetitions and seconds after --quick and overrides."""
    params = {
        "axes": dict(meta["axes"]),
        "constants": dict(meta.get("constants", {})),
        "repetitions": meta["repetitions"],
        "seconds": meta.get("seconds"),  # None: a fixed amount of work per run
    }
    if args.quick:
        quick = meta.get("quick", {})
        params["axes"].update(quick.get("axes", {}))
        params["constants"].update(quick.get("constants", {}))
        params["repetitions"] = quick.get("repetitions", 1)
        params["seconds"] = quick.get("seconds", params["seconds"])
    if args.repetitions is not None:
        params["repetitions"] = args.repetitions
    if args.seconds is not None and params["seconds"] is not None:
        params["seconds"] = args.seconds
    return params


def configurations(axes: dict) -> list[dict]:
    names = list(axes)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*axes.values())]


def expand(template: list[str], values: dict) -> list[str]:
    try:
        return [str(a).format(**values) for a in template]
    except KeyError as e:
        raise HarnessError(f"argument template names unknown parameter {e}") from None


def expand_env(env: dict, values: dict) -> dict:
    try:
        return {k: str(v).format(**values) for k, v in env.items()}
    except KeyError as e:
        raise HarnessError(f"environment template names unknown parameter {e}") from None


def file_sizes(files: dict, values: dict) -> dict:
    """Size in bytes of each file a variant names (None if missing), e.g. a trace."""
    out = {}
    for key, template in files.items():
        try:
            out[key] = Path(str(template).format(**values)).stat().st_size
        except KeyError as e:
            raise HarnessError(f"file template names unknown parameter {e}") from None
        except OSError:
            out[key] = None
    return out


# ---- the run --------------------------------------------------------------------------------


def check_clean() -> None:
    """`make bench` measures a commit: a working tree with changes outside the results (files
    changed or untracked) is refused, unless BENCH_ALLOW_DIRTY=1 (each results file then
    names the changed files and a hash of the diff, and the report says so)."""
    info = results.git_commit()
    if info["sha"] == "unknown":
        raise HarnessError("not a git checkout: make bench measures a commit")
    untracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--others", "--exclude-standard", "--", ".",
         *results.NOT_CODE],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    changed = info.get("changed_files", []) + untracked
    if not changed:
        print(f"run.py: measuring commit {info['sha'][:12]} (no changes)", file=sys.stderr)
        return
    named = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    if os.environ.get("BENCH_ALLOW_DIRTY") == "1":
        print(f"run.py: measuring uncommitted changes ({named}): BENCH_ALLOW_DIRTY=1",
              file=sys.stderr)  # fmt: skip
        return
    raise HarnessError(
        f"the working tree has changes ({named}): make bench measures a commit; commit them "
        "(or set BENCH_ALLOW_DIRTY=1 to measure them, and every results file says so)"
    )


def run_benchmark(name: str, args: argparse.Namespace) -> Path:
    meta = load_meta(name)
    build_dir = Path(args.build_dir).resolve()
    binary = build_dir / meta["binary"]
    binaries = [binary] + [build_dir / v["binary"] for v in meta["variants"] if "binary" in v]
    for b in binaries:
        if not (b.is_file() and os.access(b, os.X_OK)):
            raise HarnessError(
                f"{name}: binary {b} not found; build it first "
                f"(cmake --build {args.build_dir}) or pass --build-dir"
            )
    rec = results.start(name, build_dir)
    machine = rec.machine
    if machine["load_average_1min"] > 0.5 * (os.cpu_count() or 1):
        print(
            f"run.py: warning: the load average is {machine['load_average_1min']} on "
            f"{os.cpu_count()} cores: other work is running, and the figures will show it "
            "(recorded as load_average_1min)",
            file=sys.stderr,
        )
    if machine.get("build_type", "") not in ("Release", "RelWithDebInfo"):
        print(
            f"run.py: warning: {build_dir} has CMAKE_BUILD_TYPE="
            f"{machine.get('build_type') or '(empty)'}; numbers from an unoptimised build "
            "mislead (configure with -DCMAKE_BUILD_TYPE=RelWithDebInfo)",
            file=sys.stderr,
        )
    env0 = base_env()
    # Every variant's binary and the build-tree libraries each loads.
    files = list(dict.fromkeys(f for b in binaries for f in build_files(b, build_dir)))
    built = fingerprint(files)
    if meta.get("info_args"):
        machine["bench_info"] = run_once([str(binary), *meta["info_args"]], env0, 60)

    params = effective_params(meta, args)
    configs = configurations(params["axes"])
    variants = meta["variants"]
    metric = meta["metric"]["field"]
    reps, seconds = params["repetitions"], params["seconds"]
    total = reps * len(configs) * len(variants)
    bar = Progress(total, name)
    if "timeout" in meta:
        timeout = float(meta["timeout"])
    elif seconds is not None:
        timeout = 30 + 10 * (seconds + float(params["constants"].get("warmup", 0)))
    else:
        timeout = 600.0
    each = f"{seconds} s" if seconds is not None else "fixed work"
    print(
        f"run.py: {name}: {reps} repetitions x {len(configs)} configurations x "
        f"{len(variants)} variants = {total} runs of {each}",
        file=sys.stderr,
    )

    runs = []
    done = 0
    for rep in range(reps):
        for ci, config in enumerate(configs):
            # Rotate the variant order so no variant always runs first or last.
            shift = (rep + ci) % len(variants)
            for order, variant in enumerate(variants[shift:] + variants[:shift]):
                check_build(files, built, build_dir)
                pool_dir = tempfile.mkdtemp(prefix=f"pmkit-bench-{name}-", dir=args.pool_dir)
                try:
                    values = {
                        **params["constants"],
                        **config,
                        "seconds": seconds,
                        "pool_dir": pool_dir,
                        "build_dir": str(build_dir),
                    }
                    vbinary = build_dir / variant["binary"] if "binary" in variant else binary
                    cmd = [str(vbinary), *expand(variant.get("args", []), values)]
                    cmd += expand(meta["args"], values)
                    env = {**env0, **expand_env(variant.get("env", {}), values)}
                    result = run_once(cmd, env, timeout)
                    sizes = file_sizes(variant.get("file_sizes", {}), values)
                finally:
                    shutil.rmtree(pool_dir, ignore_errors=True)
                if metric not in result:
                    raise RunError(f"{' '.join(cmd)}: output lacks the field {metric!r}")
                record = {
                    "repetition": rep,
                    "order": order,
                    "config": config,
                    "variant": variant["name"],
                    "result": result,
                }
                if sizes:
                    record["file_sizes"] = sizes
                runs.append(record)
                done += 1
                shown = " ".join(f"{k}={v}" for k, v in config.items())
                bar.step(
                    f"rep {rep + 1}/{reps} {shown} {variant['name']}: "
                    f"{result[metric]:.4g} {meta['metric'].get('unit', '')}",
                )

    check_build(files, built, build_dir)

    medians = []
    for config in configs:
        for variant in variants:
            xs = [
                r["result"][metric]
                for r in runs
                if r["config"] == config and r["variant"] == variant["name"]
            ]
            medians.append({"config": config, "variant": variant["name"], **results.summary(xs)})

    doc = rec.document(
        "runs",
        meta.get("description", ""),
        {
            **params,
            "variants": variants,
            "metric": meta["metric"],
            "binary": meta["binary"],
            "args": meta["args"],
            "scrubbed_env_prefixes": list(SCRUBBED_ENV_PREFIXES),
            "pool_dir": args.pool_dir,
        },
        quick=args.quick,
        notes=meta.get("notes", []),
        targets=meta.get("targets", []),
        runs=runs,
        medians=medians,
    )
    out_dir = RESULTS_DIR / "tmp" if args.quick else RESULTS_DIR
    return results.write(doc, out_dir / f"{name}.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="benchmarks to run (default: every bench/*/meta.json)")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: fewer configurations, repetitions and seconds; "
        "writes bench/results/tmp/<name>.json",
    )
    ap.add_argument(
        "--build-dir", default=str(REPO / "build"), help="CMake build directory (default: build)"
    )
    ap.add_argument("--repetitions", type=int, help="override the repetitions of meta.json")
    ap.add_argument("--seconds", type=float, help="override the seconds per run of meta.json")
    ap.add_argument(
        "--pool-dir", default="/dev/shm", help="where run directories for pool files go"
    )
    ap.add_argument(
        "--check-clean",
        action="store_true",
        help="only check that the working tree has no changes outside the results (make bench "
        "measures a commit; BENCH_ALLOW_DIRTY=1 lets it measure changes) and stop",
    )
    args = ap.parse_args(argv)
    if args.check_clean:
        try:
            check_clean()
        except HarnessError as e:
            print(f"run.py: {e}", file=sys.stderr)
            return 2
        return 0
    if args.repetitions is not None and args.repetitions < 1:
        ap.error("--repetitions must be at least 1")
    if args.seconds is not None and args.seconds <= 0:
        ap.error("--seconds must be positive")
    try:
        if not Path(args.pool_dir).is_dir():
            raise HarnessError(f"--pool-dir {args.pool_dir} is not a directory")
        for name in args.names or list_benchmarks():
            out = run_benchmark(name, args)
            print(f"run.py: wrote {out.relative_to(REPO)}", file=sys.stderr)
    except HarnessError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    except RunError as e:
        print(f"run.py: run failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("run.py: interrupted; no results written", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
