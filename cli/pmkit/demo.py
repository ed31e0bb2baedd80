# SPDX-License-Identifier: Apache-2.0
"""`pmkit demo`: crash the bundled persistent key-value store and check every recovery.

Both builds of examples/kvstore.c -- the correct one, and the buggy one (-DKV_BUG_PUBLISH_EARLY:
a put links its new node before it writes the node's value) -- are compiled with `pmkit cc
--trace`, so that every store to persistent memory is a crash point (PMKIT_CRASH_POINTS=stores:
the process ends just before the store takes effect). For each build the demo then

  1. sweeps a window: WINDOW consecutive operations of the workload, chosen by the seed, are
     crashed at every store point they contain, one point per trial. A crash ends the process at
     once and every retired store survives it, as on an eADR platform, so these trials leave
     every state a crash among these operations can leave but a copy cut half-way. Every put of
     the window is caught in the buggy build: the trial that crashes just before the value is
     written leaves a reachable node without it;
  2. runs `trials` random trials: half crash at a store point drawn from all of the run's, half
     are killed (SIGKILL) after a random delay, which can also cut a copy.

After each crash `kvstore --check` recovers the store and compares it with a replay of the
completed operations. The correct build must always be consistent and the buggy one must be
caught: the demo exits 0 only if both hold.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pmkit import cc, libpmkit, paths
from pmkit.progress import Progress

KEYS = 64
WINDOW = 64  # operations swept at every store point (half of all operations are puts)
POOL_MIB = "8"
BUILDS = {"kvstore": [], "kvstore-buggy": ["-DKV_BUG_PUBLISH_EARLY"]}


@dataclass
class Row:
    """One schedule of crashes of one build, as the table shows it."""

    build: str
    schedule: str
    points: str  # crash points tried / points the schedule draws from
    tried: int = 0
    crashed: int = 0
    consistent: int = 0
    first_failure: str = ""

    @property
    def caught(self) -> int:
        return self.tried - self.consistent


def _compile(src: Path, exe: Path, defines: list[str]) -> subprocess.Popen:
    argv = ["--trace", "-O2", *defines, str(src), "-o", str(exe)]
    cmd, _ = cc.build_command(argv, cxx=False)
    return subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)


@dataclass
class Runner:
    """Runs one build's workload: complete runs that count crash points, and crash trials
    (`threads` runs trials in parallel, each on a pool of its own in `workdir`)."""

    name: str
    exe: Path
    workdir: Path
    ops: int
    seed: int
    threads: ThreadPoolExecutor
    # The environment without crash emulation or tracing: each run arms what it asks for.
    env: dict = field(
        default_factory=lambda: {
            k: v for k, v in os.environ.items() if not k.startswith(("PMKIT_CRASH_", "PMKIT_TRACE"))
        }
    )

    def _create(self, pool: Path) -> list[str]:
        """A fresh pool; returns the command that runs the workload on it."""
        if pool.exists():
            pool.unlink()
        create = [str(self.exe), "create", str(pool), "--size", POOL_MIB]
        subprocess.run(create, check=True, capture_output=True, env=self.env)
        opts = ("--ops", self.ops, "--seed", self.seed, "--keys", KEYS)
        return [str(self.exe), "run", str(pool), *map(str, opts), "--quiet"]

    def store_points(self, ops: int) -> tuple[int, float]:
        """Store crash points and wall time of one complete run of `ops` operations."""
        pool = self.workdir / f"{self.name}.pool"
        report = pool.with_suffix(".points")
        args = self._create(pool)
        args[args.index("--ops") + 1] = str(ops)
        env = dict(self.env, PMKIT_CRASH_POINTS="stores", PMKIT_CRASH_REPORT=str(report))
        t0 = time.monotonic()
        subprocess.run(args, check=True, env=env)
        dt = time.monotonic() - t0
        n = int(report.read_text().split()[0])
        report.unlink()
        pool.unlink()
        return n, dt

    def trial(self, pool: Path, how: tuple) -> tuple[bool, str]:
        """One crash and check: at store point how[1] ("point"), or SIGKILL after how[1]
        seconds ("kill"). Returns (crashed, "ok ..." or "BAD ..." with the check's last line)."""
        args = self._create(pool)
        if how[0] == "point":
            env = dict(self.env, PMKIT_CRASH_POINTS="stores", PMKIT_CRASH_AT=str(how[1]))
            crashed = subprocess.run(args, env=env).returncode == 86  # PMKIT_CRASH_EXIT
        else:
            p = subprocess.Popen(args, env=self.env)
            time.sleep(how[1])
            p.send_signal(signal.SIGKILL)
            crashed = p.wait() == -signal.SIGKILL
        check = [str(self.exe), "--check", str(pool)]
        c = subprocess.run(check, capture_output=True, text=True, env=self.env)
        out = (c.stdout + c.stderr).strip().splitlines()
        line = out[-1] if out else f"check exited {c.returncode} with no output"
        pool.unlink()
        return crashed, ("ok " if c.returncode == 0 else "BAD ") + line

    def play(self, row: Row, jobs: list[tuple]) -> Row:
        """Runs the trials `jobs` (each a `how` of trial) and tallies them in row."""
        bar = Progress(len(jobs), f"{row.build} {row.schedule.split(':')[0]}")
        pools = [self.workdir / f"{self.name}-{i}.pool" for i in range(len(jobs))]
        futures = [self.threads.submit(self.trial, pools[i], how) for i, how in enumerate(jobs)]
        for how, fut in zip(jobs, futures, strict=True):
            crashed, line = fut.result()
            row.tried += 1
            row.crashed += crashed
            if line.startswith("ok "):
                row.consistent += 1
            elif not row.first_failure:
                where = f"store point {how[1]}" if how[0] == "point" else f"kill at {how[1]:.4f} s"
                row.first_failure = f"{where}: {line[4:]}"
            bar.step(line[:24])
        bar.close()
        return row


def _source(p: paths.Paths) -> Path:
    src = Path(p.include).parent / "examples" / "kvstore" / "kvstore.c"
    if not src.is_file():
        raise paths.EnvError(f"{src} is missing: the demo runs from a source checkout")
    return src


def run(trials: int = 100, seed: int = 1, ops: int = 3000, keep: bool = False) -> int:
    p = paths.find()
    if not (p.plugin and p.tracelibdir):
        raise paths.EnvError("the demo needs the pass plugin and libpmkit-trace: build with passes")
    if ops < WINDOW + 1:
        raise cc.UsageError(f"--ops must be at least {WINDOW + 1}")
    src = _source(p)
    dom, flush = libpmkit.domain()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    workdir = Path(tempfile.mkdtemp(prefix="pmkit-demo-", dir=shm))
    rng = random.Random(seed)
    first = rng.randrange(0, ops - WINDOW)
    last = first + WINDOW - 1
    print(
        f"pmkit demo: a persistent key-value store ({ops} seeded put/get/delete operations over "
        f"{KEYS} keys)\nis crashed at every store to persistent memory in operations "
        f"{first}..{last}, and {trials} more times at random,\nper build; each crash is recovered "
        f"and checked against a replay. Pools in {workdir};\nPMKIT_DOMAIN={dom}, flushes by "
        f"{flush}. A crash ends the process at once; every retired store survives\nit, as on an "
        "eADR platform.\n"
    )
    exes = {name: workdir / f"{name}-traced" for name in BUILDS}
    compiles = {name: _compile(src, exes[name], d) for name, d in BUILDS.items()}
    for name, proc in compiles.items():
        _, err = proc.communicate()
        if proc.returncode:
            print(f"pmkit demo: compiling {name} failed:\n{err}")
            return 2

    rows: list[Row] = []
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as threads:
        for name, exe in exes.items():
            r = Runner(name, exe, workdir, ops, seed, threads)
            # The window's store points: a run of last+1 operations passes the window's last
            # point before its closing points; one of `first` operations, less those of a run
            # of none (opening and closing the pool), ends before the window's first point.
            # The range between is a superset of the window's own points.
            before, upto, none = (r.store_points(n)[0] for n in (first, last + 1, 0))
            total, duration = r.store_points(ops)
            lo, hi = max(1, before - none + 1), upto
            where = f"sweep: ops {first}..{last}, store points {lo}..{hi}"
            sweep = Row(name, where, f"{hi - lo + 1}/{hi - lo + 1}")
            rows.append(r.play(sweep, [("point", k) for k in range(lo, hi + 1)]))
            n = trials - trials // 2
            rand = Row(name, "random: store points of the whole run", f"{n}/{total}")
            rows.append(r.play(rand, [("point", rng.randint(1, total)) for _ in range(n)]))
            kill = Row(name, "kill: SIGKILL after a random delay", "-")
            jobs = [("kill", rng.uniform(0.0, duration)) for _ in range(trials // 2)]
            rows.append(r.play(kill, jobs))
    if not keep:
        for f in workdir.iterdir():
            f.unlink()
        workdir.rmdir()

    print()
    hdr = f"{'build':<14} {'crashes':<46} {'points':>12} {'crashed':>7} {'consistent':>10} "
    hdr += f"{'caught':>6}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(
            f"{r.build:<14} {r.schedule:<46} {r.points:>12} {r.crashed:>7} {r.consistent:>10} "
            f"{r.caught:>6}"
        )
    print(
        "\npoints: crash points tried / points the schedule draws from: the sweep tried all the "
        "store points\nof its window, the random trials a sample of the run's. A kill after the "
        "run has ended\ncrashes nothing (crashed < tried).\n"
    )
    for r in rows:
        if r.first_failure:
            print(f"{r.build}: first inconsistency ({r.schedule.split(':')[0]}): {r.first_failure}")
    good = [r for r in rows if r.build == "kvstore"]
    bad = [r for r in rows if r.build == "kvstore-buggy"]
    good_bad = sum(r.caught for r in good)
    sweep_caught = bad[0].caught
    if not good_bad and sweep_caught:
        print(
            f"result: every crash of kvstore recovered to a consistent state "
            f"({sum(r.tried for r in good)} trials); the crash test caught kvstore-buggy in "
            f"{sum(r.caught for r in bad)} of {sum(r.tried for r in bad)} trials, "
            f"{sweep_caught} of them in the sweep."
        )
        return 0
    if good_bad:
        print("result: FAILED: kvstore was inconsistent after a crash")
    else:
        print("result: FAILED: the sweep did not catch kvstore-buggy")
    return 1
