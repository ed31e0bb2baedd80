# SPDX-License-Identifier: Apache-2.0
"""Volatile libraries from Debian put in a pmkit pool, for the real-program tier
(tests/real/realtier.py): built in the pool modes, proven with `pmkit explore` and crash
points, with the must-fail builds, and timed against the volatile build.

Concurrency Kit (Debian's ck, built by its own configure and make with pmkit as the compiler;
tests/real/ckpm.c is the program of ours on it): a stack, an MPMC ring and a hash set used by
two threads, in robust mode, explored like uthash, with ck's compiler-builtin atomics and with
its x86_64 inline-asm atomics (Debian's own build).

uthash (Debian's uthash-dev; tests/real/utpm.c is the program of ours around it):
- robust mode, settings base, opt and flit: a traced build explored under `x86-line` with
  `--robustness` and utpm's checker (every crash point inside the operations; the verdict says
  how many were enumerated exhaustively); the same source built without the mode must fail.
- clobber mode: the eADR build crashed at every PM store of a short run (a sample of them in
  the quick subset), each crash recovered by pmkit_recover and checked exactly against a
  replay, some crashed again during their recovery, then resumed and checked; the ADR build
  explored under `x86`; the must-fail builds: the FASE annotations removed, and the logs left
  out (-pmkit-clobber-skip-log).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cli"))
import crashrun  # noqa: E402
import debsrc  # noqa: E402
import wppgolden  # noqa: E402
from realcommon import JOBS, Failed, fresh_tree, run, say  # noqa: E402

UTHASH = "2.3.0-1"
CK = "0.7.1-10"
CKPM = HERE / "ckpm.c"
CKFASE = HERE / "ckfase.c"
UTPM = HERE / "utpm.c"
# the short runs checked (operations, keys, seed): FEW_BUCKETS makes uthash double its bucket
# array within them
SHORT = ("40", "20")
TRACED = ("-DUTPM_FEW_BUCKETS", "-DUTPM_MARKS", "-DUTPM_POOL_MB=4", "-O1", "-g")
BENCH_ARGS = ("200000", "10000", "1")


def uthash_include() -> tuple[Path, str]:
    """Debian's uthash headers: the source package's src/, or (where the mirror does not serve
    the source whole) the binary package's usr/include. Returns (include dir, what it is)."""
    tree, version = debsrc.fetch("uthash", UTHASH, log=say, binary="uthash-dev")
    if (tree / "src" / "uthash.h").exists():
        return tree / "src", f"Debian's uthash source {version}"
    return tree / "usr" / "include", f"Debian's uthash-dev {version} (binary package)"


def glue_lines(mode: str) -> int:
    return glue_lines_of(UTPM, mode)


def glue_lines_of(program: Path, mode: str) -> int:
    """Lines of program between "glue begin: ... MODE ..." and "glue end", blank lines,
    comment lines and conditional compilation (the tests' variants) left out: what a user
    adds around the library for MODE."""
    n, inside = 0, False
    for line in program.read_text().splitlines():
        s = line.strip()
        if s.startswith("// glue begin:"):
            inside = mode in s.split(":", 1)[1].split("(")[0].split()
        elif s == "// glue end":
            inside = False
        elif inside and s and not s.startswith(("//", "#if", "#else", "#endif")):
            n += 1
    return n


def build(work: Path, name: str, inc: Path, *flags: str) -> Path:
    out = work / name
    run(
        wppgolden.pmkit("cc", *flags, f"-I{inc}", str(UTPM), "-o", str(out)),
        work,
        work / "build.log",
    )
    return out


def explore(
    work: Path, exe: Path, model: str, budget: int, expect: int, args: list[str],
    robustness=False, run_no: int = 1,
) -> dict:  # fmt: skip
    """pmkit explore on a run of `exe run POOL ARGS` (crash points inside the operations
    marked "op"), its checker `exe check POOL ARGS`; the exit status must be `expect`.
    run_no tells apart recorded runs of the same arguments. Returns the JSON report."""
    tag = "-".join([*args, str(run_no)])
    pool, rep = work / f"{exe.name}-{tag}.pool", work / f"{exe.name}-{tag}.json"
    trace = work / f"{exe.name}-{tag}.trace"  # kept when the verdict is not the one expected
    pool.unlink(missing_ok=True)
    cmd = wppgolden.pmkit(
        "explore", "--no-progress", "--model", model, "--mark", "op", "--budget", str(budget),
        "--per-point", "2048", "--json", str(rep), "--save-dir", str(work / f"fail-{exe.name}"),
        "--keep-trace", str(trace), *(["--robustness"] if robustness else []),
        *(["--stop-after", "1"] if expect else []),
        "--check", f"{exe} check {{pool}} {' '.join(args)}", "--", str(exe), "run", str(pool),
        *args,
    )  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != expect or not rep.exists():
        raise Failed(
            f"pmkit explore of {exe.name} {tag} exit {r.returncode}, expected {expect} (its "
            f"trace kept: {trace}; `pmkit explore --trace` replays it):"
            f"\n{r.stdout[-3000:]}{r.stderr[-2000:]}"
        )
    trace.unlink(missing_ok=True)
    return json.loads(rep.read_text())


def coverage(rep: dict) -> str:
    """What an explorer run covered, in its own numbers."""
    c = rep["coverage"]
    s = (
        f"{rep['images_checked']} distinct images at {c['points_explored']} crash points, "
        f"{c['points_exhaustive']} enumerated exhaustively"
    )
    unordered = (rep.get("robustness") or {}).get("unordered")
    if unordered:
        s += (
            f", {unordered} images losing only writes unsynchronised with the later kept ones "
            f"not counted"
        )
    if c["points_sampled"]:
        est = c["sampled_images_estimate"]  # the largest double: beyond counting
        about = "more than 1e308" if est >= sys.float_info.max else f"about {est:.2g}"
        s += f", {c['points_sampled']} sampled ({c['sampled_images_tried']} of {about} images)"
    return s


def timed(
    variants: dict[str, Path], work: Path, args: list[str], runs: int = 5,
    env: dict[str, dict[str, str]] | None = None,
) -> dict:  # fmt: skip
    """Operations per second of each build's `bench POOL ARGS` (a new pool each run, on
    tmpfs), `runs` interleaved rounds; the runs, medians, and each one's ratio to the
    volatile build's (the first variant). env: variables some variants run with."""
    per: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(runs):
        for v, exe in variants.items():
            r = subprocess.run(
                [str(exe), "bench", str(work / "bench.pool"), *args],
                capture_output=True,
                text=True,
                timeout=600,
                env=dict(os.environ, **(env or {}).get(v, {})),
            )
            if r.returncode:
                raise Failed(f"{exe.name} bench failed: {r.stderr.strip()}")
            per[v].append(json.loads(r.stdout)["ops_per_sec"])
    (work / "bench.pool").unlink(missing_ok=True)
    med = {v: sorted(x)[len(x) // 2] for v, x in per.items()}
    first = next(iter(variants))
    return {
        "args": args,
        "runs": per,
        "median_ops_per_sec": med,
        "ratio_to_volatile": {v: round(m / med[first], 3) for v, m in med.items()},
    }


def uthash_robust(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """uthash in robust mode: `trials` op sequences (seeds) explored in each setting (base only
    when quick), the must-fail build, and (not quick) the throughput."""
    inc, what = uthash_include()
    settings = ["base"] if quick else ["base", "opt", "flit"]
    seeds = [str(s) for s in range(1, trials + 1)]
    explored, t0 = {}, time.monotonic()
    images = points = exhaustive = 0
    for s in settings:
        exe = build(work, f"robust-{s}", inc, "--mode=robust", f"--robust-setting={s}",
                    "--trace", "--trace-loads", *TRACED)  # fmt: skip
        for seed in seeds:
            rep = explore(work, exe, "x86-line", 100000, 0, [*SHORT, seed], robustness=True)
            if rep["robustness"]["violating"] or rep["images_failed"]:
                raise Failed(f"robust {s} seed {seed}: {rep['robustness']}")
            explored[f"{s}/seed {seed}"] = coverage(rep)
            images += rep["images_checked"]
            points += rep["coverage"]["points_explored"]
            exhaustive += rep["coverage"]["points_exhaustive"]
            say(f"  uthash robust {s}, seed {seed}: clean under x86-line: {coverage(rep)}")
    plain = build(work, "plain", inc, "--trace", "--trace-loads", *TRACED)
    rep = explore(work, plain, "x86-line", 100000, 1, [*SHORT, "1"], robustness=True)
    why = [f["output"] for f in rep["failures"]]
    if not rep["robustness"]["violating"] or not any("inconsistent after" in w for w in why):
        raise Failed(f"uthash without robust mode failed for another reason: {why[:2]}")
    control = (
        f"without robust mode: {rep['robustness']['violating']} images no strict-persistency "
        f"execution produces, and the checker rejected {rep['images_failed']} "
        f"(\"{why[0].strip()[:90]}\")"
    )
    say(f"  uthash without robust mode: failed as meant: {control}")
    res = {
        "uthash": what,
        "settings": settings,
        "seeds": len(seeds),
        "explored": explored,
        "checked": (
            f"{len(settings) * len(seeds)} explorer runs under x86-line with --robustness "
            f"({', '.join(settings)}): {images:,} images, {exhaustive:,} of {points:,} crash "
            f"points enumerated exhaustively, 0 failed"
        ),
        "control_without_mode": control,
        "glue_lines": glue_lines("robust"),
        "source_changes": 0,
    }
    verdict = (
        f"{len(settings) * len(seeds)} explorer runs ({', '.join(settings)}; {len(seeds)} "
        f"operation sequence(s) of {SHORT[0]} inserts, replaces and deletes with a bucket "
        f"doubling), each clean under x86-line with --robustness: "
        + "; ".join(f"{k}: {v}" for k, v in explored.items())
        + f"; must-fail: {control}"
    )
    if not quick:
        opt = ("-O2", "-DNDEBUG")
        t = timed(
            {
                "volatile": build(work, "b-none", inc, *opt),
                **{
                    s: build(work, f"b-{s}", inc, "--mode=robust", f"--robust-setting={s}", *opt)
                    for s in settings
                },
            },
            work,
            list(BENCH_ARGS),
        )
        res["throughput"] = t
        res["throughput_ratio"] = t["ratio_to_volatile"]
        verdict += "; throughput (medians of 5 interleaved runs) against the volatile build: " + (
            ", ".join(f"{s} {t['ratio_to_volatile'][s]:.2f}x" for s in settings)
        )
    res["verdict"] = verdict
    res["explore_seconds"] = round(time.monotonic() - t0, 1)
    return res


def _points(
    exe: Path, work: Path, args: list[str], count: int | None, rng: random.Random,
    complete: str, points: str | None = "stores",
) -> dict:  # fmt: skip
    """Crash `exe run POOL ARGS` at each crash point of a run (PMKIT_CRASH_POINTS=points:
    stores for a --trace build; None for a build with crash points of its own), or `count`
    of them spread over it; each crash recovered by `check` (pmkit_recover, then the exact
    check), every fourth that interrupted an operation also crashed at a random point of its
    recovery and checked again, then resumed to the end and checked for `complete`."""
    pool = work / "points.pool"
    pool.unlink(missing_ok=True)
    total = crashrun.count_points(exe, "run", str(pool), *args, scratch=work, points=points)
    if count is None or count >= total:
        chosen = list(range(1, total + 1))
    else:
        step = total / count
        off = rng.random() * step
        chosen = sorted({1 + int(off + i * step) for i in range(count)})
    inflight = during = landed = 0
    for n in chosen:
        what = f"{exe.name}: crash at point {n} of {total}"
        pool.unlink(missing_ok=True)
        r = crashrun.go(exe, "run", str(pool), *args, crash_at=n, points=points)
        if r.returncode != crashrun.CRASH_EXIT:
            if r.returncode == 0:  # (threads: this run passed fewer points)
                continue
            raise Failed(f"{what}: exit {r.returncode}, not the crash's: {r.stderr.strip()}")
        landed += 1
        crashed = pool.read_bytes()
        r = crashrun.go(exe, "check", str(pool), *args)
        if r.returncode or "ok:" not in r.stdout:
            raise Failed(f"{what}: {r.stdout.strip()} {r.stderr.strip()}{_keep(work, n, crashed)}")
        # what recovery completed, as the check says it (a check that does not say would
        # count every crash as one inside an operation)
        m = re.search(r"(\d+) recovered", r.stdout)
        if not m:
            raise Failed(f"{what}: the check does not say what it recovered: {r.stdout.strip()}")
        if int(m.group(1)):
            inflight += 1
            if inflight % 4 == 1:
                pool.write_bytes(crashed)
                k = crashrun.count_points(exe, "check", str(pool), *args, scratch=work,
                                          points=points)  # fmt: skip
                pool.write_bytes(crashed)
                at = 1 + rng.randrange(max(k, 1))
                crashrun.go(exe, "check", str(pool), *args, crash_at=at, points=points)
                again = pool.read_bytes()
                r = crashrun.go(exe, "check", str(pool), *args)
                if r.returncode:
                    raise Failed(
                        f"{what}, then at point {at} of {k} of its recovery: {r.stdout.strip()}"
                        f"{_keep(work, n, crashed, again)}"
                    )
                during += 1
        r = crashrun.go(exe, "run", str(pool), *args)
        r2 = crashrun.go(exe, "check", str(pool), *args)
        if r.returncode or r2.returncode or complete not in r2.stdout:
            raise Failed(f"{what}, resumed: {r.stderr.strip()} {r2.stdout.strip()}")
    pool.unlink(missing_ok=True)
    if not inflight:
        raise Failed(f"{exe.name}: no crash fell inside an operation")
    return {"points": total, "crashed": landed, "inside_fase": inflight, "during": during}


def _keep(work: Path, n: int, crashed: bytes, again: bytes | None = None) -> str:
    """Keep the images a failed check started from (the crash's, and the one a crash during
    its recovery left), so that the failure can be replayed: a two-thread run's crash points
    fall differently in every run. Returns the words naming them."""
    paths = [work / f"failed-{n}-crashed.pool"]
    paths[0].write_bytes(crashed)
    if again is not None:
        paths.append(work / f"failed-{n}-crashed-in-recovery.pool")
        paths[1].write_bytes(again)
    return " (images kept: " + ", ".join(str(p) for p in paths) + ")"


def _must_fail_points(
    exe: Path, work: Path, args: list[str], rng: random.Random, points: str | None = "stores",
    recover: str | None = None,
) -> str:  # fmt: skip
    """A broken build (or recovery: PMKIT_SSAPP_RECOVER=recover), crashed at its crash points
    in a seeded order until the check rejects one."""
    pool = work / "bites.pool"
    pool.unlink(missing_ok=True)
    total = crashrun.count_points(exe, "run", str(pool), *args, scratch=work, points=points)
    order = list(range(1, total + 1))
    rng.shuffle(order)
    for tried, n in enumerate(order, 1):
        pool.unlink(missing_ok=True)
        crashrun.go(exe, "run", str(pool), *args, crash_at=n, points=points)
        r = crashrun.go(exe, "check", str(pool), *args, recover=recover)
        if r.returncode == 1 and "inconsistent" in r.stdout:
            pool.unlink(missing_ok=True)
            return f"rejected at point {n} of {total} ({tried} tried): {r.stdout.strip()}"
    raise Failed(f"{exe.name}: all {total} crashes passed the check")


# The PMDK-transaction version (utpm.c -DUTPM_PMDK). libpmemobj flushes only memory it takes
# for persistent memory: on tmpfs it is told to (PMEM_IS_PMEM_FORCE), and, for the eADR
# comparison, that the caches are persistent (PMEM_NO_FLUSH: no cache line flushes).
PMDK = ("-DUTPM_PMDK", "-lpmemobj")
PMDK_ENV = {
    "pmdk-adr": {"PMEM_IS_PMEM_FORCE": "1"},
    "pmdk-eadr": {"PMEM_IS_PMEM_FORCE": "1", "PMEM_NO_FLUSH": "1"},
}


def pmdk_rollback(work: Path, inc: Path, trials: int, quick: bool) -> dict:
    """The PMDK version's snapshots checked: every operation of `trials` sequences aborted
    once and the table compared with the replay (`utpm abort`), uthash's bucket doubling
    included (FEW_BUCKETS); the build that snapshots only the root must be rejected."""
    n = ("400", "60") if quick else ("2000", "300")
    exe = build(work, "pmdk-check", inc, *PMDK, "-DUTPM_FEW_BUCKETS", "-O1", "-g")
    for seed in range(1, trials + 1):
        r = subprocess.run([str(exe), "abort", str(work / "pmdk.pool"), *n, str(seed)],
                           capture_output=True, text=True, timeout=600)  # fmt: skip
        if r.returncode != 0 or not r.stdout.startswith("ok:"):
            raise Failed(f"the PMDK version's rollback, seed {seed}: {r.stdout}{r.stderr}")
    nosnap = build(work, "pmdk-nosnap", inc, *PMDK, "-DUTPM_PMDK_NO_SNAPSHOT",
                   "-DUTPM_FEW_BUCKETS", "-O1", "-g")  # fmt: skip
    c = subprocess.run([str(nosnap), "abort", str(work / "pmdk.pool"), *n, "1"],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    (work / "pmdk.pool").unlink(missing_ok=True)
    if c.returncode != 1 or "inconsistent after" not in c.stdout:
        raise Failed(f"the PMDK version without snapshots was not rejected: {c.stdout}")
    why = c.stdout.strip().splitlines()[0]
    say(f"  uthash PMDK version: {trials} x {n[0]} operations aborted and rolled back exactly; "
        f"without its snapshots: {why}")  # fmt: skip
    return {
        "operations_aborted": trials * int(n[0]),
        "glue_lines": glue_lines("pmdk"),
        "control_no_snapshot": why,
    }


def uthash_clobber(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """uthash's insert, replace and delete as clobber-mode FASEs (see the module's
    docstring); `trials` op sequences crashed at their stores (40 spread points when quick,
    every one otherwise)."""
    inc, what = uthash_include()
    t0 = time.monotonic()
    fase = ("--mode=clobber", "-DUTPM_FASE")
    eadr = build(work, "clobber-eadr", inc, *fase, "--clobber-domain=eadr", "--trace", *TRACED)
    crashed = []
    for seed in (str(s) for s in range(1, trials + 1)):
        p = _points(eadr, work, [*SHORT, seed], 40 if quick else None, rng,
                    f"ok: {SHORT[0]} operations")  # fmt: skip
        crashed.append(p)
        say(f"  uthash clobber eADR, seed {seed}: {p['crashed']} of {p['points']} stores crashed "
            f"at, {p['inside_fase']} inside a FASE, {p['during']} also during recovery: all "
            f"recovered exactly")  # fmt: skip
    removed = build(work, "fase-removed", inc, "--mode=clobber", "-DUTPM_FASE_REMOVED",
                    "--clobber-domain=eadr", "--trace", *TRACED)  # fmt: skip
    bite = _must_fail_points(removed, work, [*SHORT, "1"], rng)
    say(f"  uthash with the FASEs removed: failed as meant: {bite}")
    adr = build(work, "clobber-adr", inc, *fase, "--clobber-domain=adr", "--trace", *TRACED)
    rep_adr = explore(work, adr, "x86", 4000 if quick else 20000, 0, [*SHORT, "1"])
    adr_cov = coverage(rep_adr)
    say(f"  uthash clobber ADR: clean under x86: {adr_cov}")
    nolog = build(work, "clobber-nolog", inc, *fase, "--clobber-domain=adr", "--trace",
                  "-mllvm", "-pmkit-clobber-skip-log", *TRACED)  # fmt: skip
    rep = explore(work, nolog, "x86", 4000, 1, [*SHORT, "1"])
    nolog_why = rep["failures"][0]["output"].strip()
    if "inconsistent after" not in nolog_why and "pmkit_recover failed" not in nolog_why:
        raise Failed(f"uthash clobber without logs failed for another reason: {nolog_why}")
    say(f"  uthash clobber ADR without logs: failed as meant: {nolog_why}")
    pmdk = pmdk_rollback(work, inc, trials, quick)
    res = {
        "uthash": what,
        "crash_points": crashed,
        "explored_adr": adr_cov,
        "checked": (
            f"eADR: {sum(p['crashed'] for p in crashed):,} crashes at PM stores "
            f"({'a sample' if quick else 'every store'} of {trials} sequence(s)), "
            f"{sum(p['during'] for p in crashed)} again during recovery; ADR: "
            f"{rep_adr['images_checked']:,} images under x86 "
            f"({rep_adr['coverage']['points_exhaustive']} of "
            f"{rep_adr['coverage']['points_explored']} points exhaustive); 0 failed"
        ),
        "control_fase_removed": bite,
        "control_no_log": nolog_why,
        "pmdk": pmdk,
        "glue_lines": glue_lines("clobber"),
        "source_changes": 0,
    }
    n = sum(p["crashed"] for p in crashed)
    verdict = (
        f"eADR: {n} crashes at PM stores over {trials} operation sequence(s) "
        f"({'a spread sample' if quick else 'every store'}), "
        f"{sum(p['inside_fase'] for p in crashed)} inside a FASE, "
        f"{sum(p['during'] for p in crashed)} crashed again during recovery, each recovered to "
        f"exactly the replay and resumed; ADR: clean under x86 ({adr_cov}); must-fail: with the "
        f"FASEs removed the check {bite.split(':')[0]}, without logs under x86 \"{nolog_why}\"; "
        f"the PMDK-transaction version ({pmdk['glue_lines']} glue lines against clobber's "
        f"{glue_lines('clobber')}): {pmdk['operations_aborted']} operations aborted once each "
        f"and rolled back exactly, and without its snapshots rejected"
    )
    if not quick:
        opt = ("-O2", "-DNDEBUG")
        t = timed(
            {
                "volatile": build(work, "b-none", inc, *opt),
                "clobber-eadr": build(work, "b-eadr", inc, *fase, "--clobber-domain=eadr", *opt),
                "clobber-adr": build(work, "b-adr", inc, *fase, "--clobber-domain=adr", *opt),
                "pmdk-eadr": build(work, "b-pmdk", inc, *PMDK, *opt),
                "pmdk-adr": work / "b-pmdk",
            },
            work,
            list(BENCH_ARGS),
            env=PMDK_ENV,
        )
        res["throughput"] = t
        res["throughput_ratio"] = t["ratio_to_volatile"]
        verdict += "; throughput against the volatile build (medians of 5 interleaved runs): " + (
            ", ".join(f"{v} {r:.2f}x" for v, r in t["ratio_to_volatile"].items() if v != "volatile")
        )
    res["verdict"] = verdict
    res["check_seconds"] = round(time.monotonic() - t0, 1)
    return res


def cc_script(work: Path, name: str, *flags: str) -> Path:
    """A compiler command as one program: ck's configure takes CC as a path (a CC with
    arguments, "pmkit cc --mode=robust", is looked up as one name, not found, and replaced by
    gcc without a word), so a user of such a build system writes this two-line script."""
    script = work / f"cc-{name}"
    cmd = " ".join(wppgolden.pmkit("cc", *flags))
    script.write_text(f'#!/bin/sh\nexec {cmd} "$@"\n')
    script.chmod(0o755)
    return script


def build_ck(work: Path, name: str, builtins: bool, *flags: str) -> tuple[Path, list[str]]:
    """Debian's ck configured as debian/rules configures it (--cores=2), with
    --use-cc-builtins when `builtins`, compiled by `pmkit cc FLAGS` through cc_script, and
    ckpm.c linked to its libck.a with the same flags. Returns (the program, its flags)."""
    src, version, log = fresh_tree("ck", CK, work, f"ck-{name}")
    cc = cc_script(work, name, *flags)
    conf = ["./configure", f"--prefix={work / ('ck-inst-' + name)}", "--cores=2"]
    run([*conf, *(["--use-cc-builtins"] if builtins else [])], src, log,
        env=dict(os.environ, CC=str(cc)))  # fmt: skip
    run(["make", f"-j{JOBS}"], src, log)
    # (the compiler script's path, not the word pmkit: the tier's folder is named pmkit-real)
    if f"CC={cc}" not in (src / "build" / "ck.build").read_text().splitlines():
        raise Failed(f"ck's build does not use pmkit's compiler: {src / 'build' / 'ck.build'}")
    exe = work / f"ckpm-{name}"
    prog_flags = [*flags, *(["-DCK_USE_CC_BUILTINS=1"] if builtins else [])]
    run(
        wppgolden.pmkit("cc", *prog_flags, f"-I{src / 'include'}", str(CKPM))
        + [str(src / "src" / "libck.a"), "-lpthread", "-o", str(exe)],
        work,
        log,
    )
    return exe, prog_flags


def ck_robust(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """ck's stack, MPMC ring and hash set in a pool, two threads, robust mode: `trials`
    recorded runs explored per setting and atomics (builtins: base, opt, flit; inline asm:
    base; base only, builtins, when quick), the build without the mode must fail, and (not
    quick) the throughput against the volatile build."""
    iters = "20"
    settings = ["base"] if quick else ["base", "opt", "flit"]
    configs = [(s, True) for s in settings] + ([] if quick else [("base", False)])
    explored, images, points, exhaustive = {}, 0, 0, 0
    traced = ("--trace", "--trace-loads", "-DCKPM_POOL_MB=4", "-O1", "-g")
    t0 = time.monotonic()
    for s, builtins in configs:
        kind = "builtins" if builtins else "asm"
        exe, _ = build_ck(work, f"{s}-{kind}", builtins, "--mode=robust",
                          f"--robust-setting={s}", *traced)  # fmt: skip
        for n in range(1, trials + 1):
            rep = explore(work, exe, "x86-line", 100000, 0, [iters], robustness=True, run_no=n)
            if rep["robustness"]["violating"] or rep["images_failed"]:
                raise Failed(f"ck robust {s} ({kind}) run {n}: {rep['robustness']}")
            explored[f"{s}/{kind}/run {n}"] = coverage(rep)
            images += rep["images_checked"]
            points += rep["coverage"]["points_explored"]
            exhaustive += rep["coverage"]["points_exhaustive"]
            say(f"  ck robust {s} ({kind} atomics), run {n}: clean under x86-line: "
                f"{coverage(rep)}")  # fmt: skip
    plain, _ = build_ck(work, "plain", True, *traced)
    rep = explore(work, plain, "x86-line", 100000, 1, [iters], robustness=True)
    why = [f["output"].strip() for f in rep["failures"]]
    if not rep["robustness"]["violating"] or not any("inconsistent" in w for w in why):
        raise Failed(f"ck without robust mode failed for another reason: {why[:2]}")
    control = (
        f"without robust mode: {rep['robustness']['violating']} images no strict-persistency "
        f"execution produces, and the checker rejected {rep['images_failed']} "
        f'("{why[0][:90]}")'
    )
    say(f"  ck without robust mode: failed as meant: {control}")
    res = {
        "ck": CK,
        "configs": [f"{s}/{'builtins' if b else 'asm'}" for s, b in configs],
        "runs": trials,
        "explored": explored,
        "checked": (
            f"{len(explored)} explorer runs of 2 threads under x86-line with --robustness "
            f"({', '.join(res_configs(configs))}): {images:,} images, {exhaustive:,} of "
            f"{points:,} crash points enumerated exhaustively, 0 failed"
        ),
        "control_without_mode": control,
        "glue_lines": glue_lines_of(CKPM, "robust") + 2,  # and the 2-line compiler script
        "source_changes": 0,
    }
    verdict = (
        f"{len(explored)} explorer runs (2 threads, {iters} iterations each of a stack push, "
        f"a ring enqueue, pops, dequeues and hash-set inserts and lookups), each clean under "
        f"x86-line with --robustness: "
        + "; ".join(f"{k}: {v}" for k, v in explored.items())
        + f"; must-fail: {control}"
    )
    if not quick:
        opt = ("-O2", "-DNDEBUG")
        variants = {"volatile": build_ck(work, "b-none", True, *opt)[0]}
        for s in settings:
            variants[s] = build_ck(work, f"b-{s}", True, "--mode=robust",
                                   f"--robust-setting={s}", *opt)[0]  # fmt: skip
        t = timed(variants, work, ["100000"])
        res["throughput"] = t
        res["throughput_ratio"] = t["ratio_to_volatile"]
        verdict += "; throughput (2 threads, medians of 5 interleaved runs) against the " + (
            "volatile build: "
            + ", ".join(f"{s} {t['ratio_to_volatile'][s]:.2f}x" for s in settings)
        )
    res["verdict"] = verdict
    res["explore_seconds"] = round(time.monotonic() - t0, 1)
    return res


def res_configs(configs) -> list[str]:
    return [f"{s} with {'builtin' if b else 'inline-asm'} atomics" for s, b in configs]


def ck_ssapp(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """ck's stack and SPSC queue operations as SSAPP FASEs, two threads (tests/real/ckfase.c),
    eADR: `trials` runs crashed at each of their crash points (one before every store of a
    FASE; 40 spread points when quick), recovered, some crashed again during recovery,
    resumed and checked exactly; the must-fail: recovery taking every interrupted RMW for
    done (PMKIT_SSAPP_RECOVER=skip) loses a push; and (not quick) the throughput against the
    volatile build."""
    src, version, log = fresh_tree("ck", CK, work, "ck-ssapp")
    cc = cc_script(work, "ssapp", "--mode=ssapp")
    run(["./configure", "--cores=2", "--use-cc-builtins"], src, log,
        env=dict(os.environ, CC=str(cc)))  # fmt: skip
    run(["make", f"-j{JOBS}"], src, log)
    inc = [f"-I{src / 'include'}", "-DCK_USE_CC_BUILTINS=1"]

    def build(name: str, *flags: str) -> Path:
        exe = work / name
        run(wppgolden.pmkit("cc", *flags, *inc, str(CKFASE), "-lpthread", "-o", str(exe)),
            work, log)  # fmt: skip
        return exe

    t0 = time.monotonic()
    crash = build("ckfase-crash", "--mode=ssapp", "-DCKFASE_FASE", "-O2", "-g",
                  "-mllvm", "-pmkit-ssapp-crash-points=store")  # fmt: skip
    n = "20"
    done = f"ok: {n}+{n} pushed"
    crashed = []
    for k in range(1, trials + 1):
        p = _points(crash, work, [n], 40 if quick else None, rng, done, points=None)
        crashed.append(p)
        say(f"  ck ssapp, run {k}: {p['crashed']} crashes of {p['points']} crash points, "
            f"{p['inside_fase']} inside a FASE, {p['during']} also during recovery: all "
            f"recovered exactly")  # fmt: skip
    bite = _must_fail_points(crash, work, [n], rng, points=None, recover="skip")
    say(f"  ck ssapp with recovery skipping RMWs: failed as meant: {bite}")
    res = {
        "ck": CK,
        "crash_points": crashed,
        "checked": (
            f"{sum(p['crashed'] for p in crashed):,} crashes at SSAPP crash points "
            f"({'a sample' if quick else 'every one'} of {trials} two-thread run(s)), "
            f"{sum(p['inside_fase'] for p in crashed)} inside a FASE, "
            f"{sum(p['during'] for p in crashed)} again during recovery; 0 failed"
        ),
        "control_recovery_skips_rmws": bite,
        "glue_lines": glue_lines_of(CKFASE, "ssapp") + 2,  # and the 2-line compiler script
        "source_changes": 0,
    }
    verdict = (
        f"{res['checked']}: every record pushed found once in the stack or a pop's log, the "
        f"queue in order; must-fail: with recovery taking interrupted RMWs for done, {bite}"
    )
    if not quick:
        big = ("-O2", "-DMAXOPS=200000", "-DPOOL_MB=128")
        t = timed(
            {
                "volatile": build("ckfase-volatile", *big),
                "ssapp": build("ckfase-ssapp", "--mode=ssapp", "-DCKFASE_FASE", *big),
                "ssapp-compiler": build("ckfase-ssapp-compiler", "--mode=ssapp",
                                        "--ssapp-fence=compiler", "-DCKFASE_FASE", *big),
            },
            work,
            ["100000"],
        )  # fmt: skip
        res["throughput"] = t
        res["throughput_ratio"] = t["ratio_to_volatile"]
        verdict += "; throughput (2 threads, medians of 5 interleaved runs) against the " + (
            "volatile build: "
            + ", ".join(
                f"{v} {x:.2f}x" for v, x in t["ratio_to_volatile"].items() if v != "volatile"
            )
        )
    res["verdict"] = verdict
    res["check_seconds"] = round(time.monotonic() - t0, 1)
    return res
