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
bench/results/<name>.json (bench/results/tmp/<name>.json with --quick) holding
the machine, the git commit, the date, the parameters, every repetition and the
medians. Inherited PMKIT_*, PMEM_* and PMEMOBJ_* variables are dropped so
that only the variants' own settings apply, and a run stops without writing
anything if a variant's binary or its libraries in the build directory change
under it (another build). bench/report.py turns the JSON into docs/results.md.

Usage: python bench/run.py [NAME ...] [--quick] [--build-dir DIR] [--repetitions N]
       [--seconds S] [--pool-dir DIR]
Exit status: 0 on success, 1 if a run failed, 2 on a usage or environment error.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
SCHEMA = 1

# Inherited variables that would change what a run measures (crash points,
# domain, flush kind, PMDK tuning). Each variant sets its own explicitly.
SCRUBBED_ENV_PREFIXES = ("PMKIT_", "PMEM_", "PMEMOBJ_")


# What this harness and bench/report.py write: changes there do not make the
# measured code differ from the commit.
NOT_CODE = (":(exclude)bench/results", ":(exclude)docs/results.md", ":(exclude)docs/figures")


class HarnessError(Exception):
    """A usage or environment problem: one line for the user, exit status 2."""


class RunError(Exception):
    """A benchmark binary failed: exit status 1."""


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


# ---- machine and commit -------------------------------------------------------------------


def cpu_info() -> dict:
    model, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name":
                model = value.strip()
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "cache_flush_instructions": [f for f in ("clwb", "clflushopt", "clflush") if f in flags],
    }


def cmake_cache(build_dir: Path) -> dict:
    wanted = {"CMAKE_BUILD_TYPE": "build_type", "CMAKE_C_COMPILER": "c_compiler"}
    out = {}
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            key, _, value = line.partition("=")
            key = key.split(":")[0]
            if key in wanted:
                out[wanted[key]] = value
    except OSError:
        pass
    return out


def machine_info(build_dir: Path) -> dict:
    info = cpu_info()
    info["kernel"] = f"{platform.system()} {platform.release()}"
    libc = " ".join(platform.libc_ver()).strip()
    if libc:
        info["libc"] = libc
    info["python"] = platform.python_version()
    # what else ran: a figure measured beside busy processes is not what it seems
    info["load_average_1min"] = round(os.getloadavg()[0], 2)
    info.update(cmake_cache(build_dir))
    return info


def git_commit() -> dict:
    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *argv], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        changed = git("diff", "HEAD", "--name-only", "--", ".", *NOT_CODE).splitlines()
        diff = subprocess.run(
            ["git", "-C", str(REPO), "diff", "HEAD", "--", ".", *NOT_CODE],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"sha": "unknown", "dirty": None}
    info = {"sha": sha, "dirty": bool(changed)}
    if changed:
        # Identify the uncommitted state that was measured, not just that there was one.
        info["changed_files"] = changed
        info["diff_sha256"] = hashlib.sha256(diff).hexdigest()
    return info


def check_clean() -> None:
    """`make bench` measures a commit: a working tree with changes outside the results (files
    changed or untracked) is refused, unless BENCH_ALLOW_DIRTY=1 (each results file then
    names the changed files and a hash of the diff, and the report says so)."""
    info = git_commit()
    if info["sha"] == "unknown":
        raise HarnessError("not a git checkout: make bench measures a commit")
    untracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--others", "--exclude-standard", "--", ".",
         *NOT_CODE],
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


# ---- the run --------------------------------------------------------------------------------


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


def check_build(files: list[Path], built: dict, build_dir: Path) -> None:
    if fingerprint(files) != built:
        raise RunError(
            f"the build in {build_dir} changed during the run (another build?); "
            "no results written: rerun when no build is in progress"
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
    machine = machine_info(build_dir)
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
    commit = git_commit()
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
    started = datetime.datetime.now(datetime.UTC)
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
            values = [
                r["result"][metric]
                for r in runs
                if r["config"] == config and r["variant"] == variant["name"]
            ]
            medians.append(
                {
                    "config": config,
                    "variant": variant["name"],
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                    "n": len(values),
                }
            )

    doc = {
        "schema": SCHEMA,
        "benchmark": name,
        "description": meta.get("description", ""),
        "quick": bool(args.quick),
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round((datetime.datetime.now(datetime.UTC) - started).total_seconds(), 1),
        "machine": machine,
        "commit": commit,
        "parameters": {
            **params,
            "variants": variants,
            "metric": meta["metric"],
            "binary": meta["binary"],
            "args": meta["args"],
            "scrubbed_env_prefixes": list(SCRUBBED_ENV_PREFIXES),
            "pool_dir": args.pool_dir,
        },
        "targets": meta.get("targets", []),
        "notes": meta.get("notes", []),
        "runs": runs,
        "medians": medians,
    }
    out_dir = RESULTS_DIR / "tmp" if args.quick else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{name}.json"
    tmp = out.with_suffix(".json.part")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(out)
    return out


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
