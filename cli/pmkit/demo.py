# SPDX-License-Identifier: Apache-2.0
"""`pmkit demo`: crash the bundled persistent key-value store and check every recovery.

For each build of examples/kvstore (the correct one and kvstore-buggy, which publishes a node
before writing its value), each trial starts a fresh pool, runs a seeded workload and ends it with
an emulated power failure: half the trials at a crash point drawn uniformly from all the run's
crash points (PMKIT_CRASH_AT, every fence and allocator store is one), half by SIGKILL after a
random delay. Then `kvstore --check` recovers and compares the store with a replay of the
completed operations. The correct build must always be consistent, and the crash test must catch
the buggy one: the demo exits 0 only if both hold.
"""

from __future__ import annotations

import os
import random
import re
import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from pmkit import libpmkit, paths
from pmkit.progress import Progress

KEYS = 64


@dataclass
class Tally:
    build: str
    trials: int = 0
    crashed: int = 0
    consistent: int = 0
    inconsistent: int = 0
    ops_at_crash: list[int] = field(default_factory=list)
    first_failure: str = ""


def _count_points(exe: str, pool: str, ops: int, seed: int, env: dict) -> tuple[int, float]:
    """Crash points and wall time of one complete run."""
    report = pool + ".points"
    subprocess.run([exe, "create", pool], check=True, capture_output=True, env=env)
    t0 = time.monotonic()
    run_env = dict(env, PMKIT_CRASH_REPORT=report)
    args = [exe, "run", pool, "--ops", str(ops), "--seed", str(seed), "--keys", str(KEYS)]
    subprocess.run([*args, "--quiet"], check=True, env=run_env)
    dt = time.monotonic() - t0
    with open(report) as f:
        n = int(f.read().split()[0])
    os.unlink(report)
    os.unlink(pool)
    return n, dt


def _trial(exe: str, pool: str, ops: int, seed: int, env: dict, how: str, rng) -> tuple[bool, str]:
    """One crash and check. Returns (crashed, check output)."""
    subprocess.run([exe, "create", pool], check=True, capture_output=True, env=env)
    args = [exe, "run", pool, "--ops", str(ops), "--seed", str(seed), "--keys", str(KEYS)]
    args.append("--quiet")
    if how[0] == "point":
        r = subprocess.run(args, env=dict(env, PMKIT_CRASH_AT=str(how[1])))
        crashed = r.returncode == 86
    else:
        p = subprocess.Popen(args, env=env)
        time.sleep(how[1])
        p.send_signal(signal.SIGKILL)
        crashed = p.wait() == -signal.SIGKILL
    c = subprocess.run([exe, "--check", pool], capture_output=True, text=True, env=env)
    out = (c.stdout + c.stderr).strip().splitlines()
    line = out[-1] if out else f"check exited {c.returncode} with no output"
    os.unlink(pool)
    return crashed, ("ok " if c.returncode == 0 else "BAD ") + line


def run(trials: int = 100, seed: int = 1, ops: int = 3000, keep: bool = False) -> int:
    p = paths.find()
    builds = {
        "kvstore": str(p.binary("examples/kvstore/kvstore")),
        "kvstore-buggy": str(p.binary("examples/kvstore/kvstore-buggy")),
    }
    env = dict(os.environ)
    env.pop("PMKIT_CRASH_AT", None)
    env.pop("PMKIT_CRASH_SEED", None)
    dom, flush = libpmkit.domain()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    workdir = tempfile.mkdtemp(prefix="pmkit-demo-", dir=shm)
    print(
        f"pmkit demo: a persistent key-value store ({ops} seeded put/get/delete operations over "
        f"{KEYS} keys)\nis crashed {trials} times per build, then recovered and checked against "
        f"a replay.\npools in {workdir}; PMKIT_DOMAIN={dom}, flushes by {flush}. A crash ends the "
        "process at once;\nevery retired store survives it, as on an eADR platform.\n"
    )
    rng = random.Random(seed)
    results = []
    for name, exe in builds.items():
        pool = os.path.join(workdir, f"{name}.pool")
        points, duration = _count_points(exe, pool, ops, seed, env)
        t = Tally(name)
        bar = Progress(trials, name)
        for k in range(trials):
            if k % 2 == 0:
                how = ("point", rng.randint(1, points))
            else:
                how = ("kill", rng.uniform(0.0, duration))
            crashed, line = _trial(exe, pool, ops, seed + k, env, how, rng)
            t.trials += 1
            t.crashed += crashed
            m = re.search(r"ops_done=(\d+)", line)
            if m and crashed:
                t.ops_at_crash.append(int(m.group(1)))
            if line.startswith("ok "):
                t.consistent += 1
            else:
                t.inconsistent += 1
                t.first_failure = t.first_failure or f"{how[0]} {how[1]}: {line[4:]}"
            bar.step(line[:24])
        bar.close()
        results.append((t, points))
    if not keep:
        os.rmdir(workdir)

    print()
    hdr = f"{'build':<14} {'points':>7} {'trials':>6} {'crashed':>7} {'consistent':>10} "
    hdr += f"{'caught':>6} {'median ops at crash':>19}"
    print(hdr)
    print("-" * len(hdr))
    for t, points in results:
        med = statistics.median(t.ops_at_crash) if t.ops_at_crash else 0
        print(
            f"{t.build:<14} {points:>7} {t.trials:>6} {t.crashed:>7} {t.consistent:>10} "
            f"{t.inconsistent:>6} {med:>19.0f}"
        )
    good, bad = results[0][0], results[1][0]
    print()
    for t in (good, bad):
        if t.first_failure:
            print(f"{t.build}: first inconsistency: {t.first_failure}")
    ok = good.inconsistent == 0 and bad.inconsistent > 0
    if ok:
        print(
            "result: every crash of kvstore recovered to a consistent state; the crash test "
            f"caught kvstore-buggy in {bad.inconsistent} of {bad.trials} trials."
        )
        return 0
    if good.inconsistent:
        print("result: FAILED: kvstore was inconsistent after a crash")
    else:
        print("result: FAILED: the crash test did not catch kvstore-buggy")
    return 1
