# SPDX-License-Identifier: Apache-2.0
"""SSAPP mode end to end (eADR: a killed process): tests/passes/ssapp/litmus.c built with
`pmkit cc --mode=ssapp` and a crash point before every store and call of its FASEs, killed at
every crash point of a short run in turn (the SSAPP paper's stopper, automated), then recovered
(the interrupted FASE resumes) and compared with a replay; killed again during recovery; two
threads killed at random points. A build whose blocks are not cut into RISEs must fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from crashrun import CRASH_EXIT, count_points, go

ROOT = Path(__file__).resolve().parents[2]
LITMUS = ROOT / "tests" / "passes" / "ssapp" / "litmus.c"
OPS = 12  # two rounds of the six litmus operations


def build(run, tmp_path: Path, name: str, *extra: str) -> Path:
    exe = tmp_path / name
    r = run(
        "cc", "--mode=ssapp", "--ssapp-rmw-ints", "-O2", "-g",
        "-mllvm", "-pmkit-ssapp-crash-points=store", *extra, str(LITMUS), "-o", str(exe),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return exe


def crash_points(exe: Path, pool: Path, tmp_path: Path) -> int:
    n = count_points(exe, "run", str(pool), str(OPS), scratch=tmp_path)
    pool.unlink()
    return n


def crash_everywhere(
    exe: Path, pool: Path, tmp_path: Path, recover: str | None = None
) -> tuple[list[str], int]:
    """Crash at every point in turn: the failures of `check` (whose recovery may be told to
    be naive), and how many recoveries ran."""
    bad, resumed = [], 0
    for k in range(1, crash_points(exe, pool, tmp_path) + 1):
        if pool.exists():
            pool.unlink()
        r = go(exe, "run", str(pool), str(OPS), crash_at=k)
        assert r.returncode in (0, CRASH_EXIT), r.stderr
        c = go(exe, "check", str(pool), recover=recover)
        resumed += "(recovered)" in c.stdout
        if c.returncode:
            bad.append(f"crash point {k}: {c.stdout.strip()} {c.stderr.strip()}")
    return bad, resumed


@pytest.mark.parametrize("fence", ["sfence", "compiler"])
def test_every_crash_point_recovers(run, shm, tmp_path, fence):
    exe = build(run, tmp_path, f"litmus-{fence}", f"--ssapp-fence={fence}")
    bad, resumed = crash_everywhere(exe, shm / f"{fence}.pool", tmp_path)
    assert bad == []
    assert resumed > 100  # most points interrupt a FASE, which recovery resumes


def test_without_rises_a_crash_repeats_work(run, shm, tmp_path):
    """The must-fail case: each block one RISE that recovery re-executes, so a crash after
    `x++` stored its result increments x again."""
    exe = build(run, tmp_path, "litmus-nosplit", "-mllvm", "-pmkit-ssapp-no-split")
    bad, _ = crash_everywhere(exe, shm / "nosplit.pool", tmp_path)
    assert bad, "a build without RISEs passed every crash point"
    assert any("differs from a replay" in b for b in bad)


def test_rmws_apply_once_only_with_their_tags(run, shm, tmp_path):
    """The must-fail case of the RMWs: a recovery that ignores the tags (re-executing an RMW
    RISE whenever its result slots are not complete, as without TSA) applies an atomic add
    or a stack push twice; with the tags every crash point passes (the test above)."""
    exe = build(run, tmp_path, "litmus-naive")
    bad, _ = crash_everywhere(exe, shm / "naive.pool", tmp_path, recover="naive")
    assert any("counter" in b or "lock-free stack" in b for b in bad), bad[:3]


def test_a_crash_during_recovery_recovers_again(run, shm, tmp_path):
    exe = build(run, tmp_path, "litmus")
    pool = shm / "rec.pool"
    n = crash_points(exe, pool, tmp_path)
    again = 0
    for k in range(5, n, max(1, n // 25)):
        for j in (1, 2, 3, 5, 8, 13):  # points of recovery itself
            if pool.exists():
                pool.unlink()
            assert go(exe, "run", str(pool), str(OPS), crash_at=k).returncode in (0, CRASH_EXIT)
            again += go(exe, "check", str(pool), crash_at=j).returncode == CRASH_EXIT
            c = go(exe, "check", str(pool))
            assert c.returncode == 0, f"run crash {k}, recovery crash {j}: {c.stdout}"
    assert again > 20  # recovery did get interrupted


def test_a_crash_twice_before_an_rmw(run, shm, tmp_path):
    """tests/cli/ssapp/rmw_twice.c: consecutive FASEs, each a compare-and-swap on a word,
    two FASEs of one shape taking turns on two words. Crashed at every point of a run, and
    its recovery at every point of its own, recovery must leave each word equal to its
    count. Recovery once took the record of an RMW attempt two executions old (same RISE,
    same torn bit) for the interrupted one after a crash between an attempt's first record
    and its CAS, and a second crash at the same place of the re-execution: the increment was
    lost (found on Concurrency Kit's stack by the real-program tier). And it took the other
    FASE's attempt (same RISE number, same torn bit in a fresh frame) for a FASE interrupted
    between its RMW RISE's start and its attempt's first record (one crash)."""
    exe = tmp_path / "rmw_twice"
    r = run(
        "cc", "--mode=ssapp", "--ssapp-rmw-ints", "-O2", "-g",
        "-mllvm", "-pmkit-ssapp-crash-points=store",
        str(ROOT / "tests" / "cli" / "ssapp" / "rmw_twice.c"), "-o", str(exe),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    pool, saved = shm / "twice.pool", shm / "twice-crashed.pool"
    n = count_points(exe, "run", str(pool), "3", scratch=tmp_path)
    bad, pairs = [], 0
    for k in range(1, n + 1):
        pool.unlink(missing_ok=True)
        assert go(exe, "run", str(pool), "3", crash_at=k).returncode == CRASH_EXIT
        saved.write_bytes(pool.read_bytes())
        rep = tmp_path / "points"
        c = go(exe, "check", str(pool), report=rep)
        if c.returncode:  # one crash is enough when the attempts' torn bits agree
            bad.append(f"run crash {k}: {c.stdout.strip()}")
            continue
        for j in range(1, int(rep.read_text().split()[0]) + 1):
            pool.write_bytes(saved.read_bytes())
            assert go(exe, "check", str(pool), crash_at=j).returncode == CRASH_EXIT
            c = go(exe, "check", str(pool))
            pairs += 1
            if c.returncode:
                bad.append(f"run crash {k}, recovery crash {j}: {c.stdout.strip()}")
    assert pairs > 100
    assert bad == []


def test_another_build_refuses_to_resume(run, shm, tmp_path):
    """A FASE interrupted in one build is not resumed by a build whose RISEs differ: that
    would start at the wrong place. Recovery says so and leaves the pool as it is."""
    exe = build(run, tmp_path, "litmus")
    other = build(run, tmp_path, "litmus-other", "-mllvm", "-pmkit-ssapp-no-split")
    pool = shm / "other.pool"
    for k in range(20, 200, 7):  # a crash point inside a FASE
        if pool.exists():
            pool.unlink()
        assert go(exe, "run", str(pool), str(OPS), crash_at=k).returncode == CRASH_EXIT
        c = go(other, "check", str(pool))
        if c.returncode:
            break
    assert "whose RISEs differ" in c.stdout, c.stdout
    assert go(exe, "check", str(pool)).returncode == 0  # its own build resumes it


def test_frames_survive_pool_gc(run, shm, tmp_path):
    """A thread's frames and state are blocks of the pool that gc must see as reachable: the
    run goes on after a gc, and a crash after it still recovers."""
    exe = build(run, tmp_path, "litmus-gc")
    pool = shm / "gc.pool"
    assert go(exe, "run", str(pool), "40").returncode == 0
    r = run("pool", "gc", str(pool))
    assert r.returncode == 0, r.stderr
    assert go(exe, "run", str(pool), "80", crash_at=150).returncode == CRASH_EXIT
    assert go(exe, "run", str(pool), "80").returncode == 0
    c = go(exe, "check", str(pool), "80")
    assert c.returncode == 0, c.stdout


def test_two_threads_killed_at_random_points(run, shm, tmp_path):
    exe = build(run, tmp_path, "litmus")
    pool = shm / "mt.pool"
    for seed in range(1, 16):
        if pool.exists():
            pool.unlink()
        r = go(exe, "run", str(pool), "120", "2", seed=seed)
        assert r.returncode in (0, CRASH_EXIT), r.stderr
        c = go(exe, "check", str(pool))
        assert c.returncode == 0, f"seed {seed}: {c.stdout}"
        r = go(exe, "run", str(pool), "120")  # and the run goes on to the end
        assert r.returncode == 0, r.stderr
        assert go(exe, "check", str(pool), "120").returncode == 0
