# SPDX-License-Identifier: Apache-2.0
"""Clobber mode end to end under eADR: tests/passes/clobber/bank.c built with `pmkit cc
--mode=clobber` and crash points before every write to PM, killed at every crash point of a
short run (PMKIT_CRASH_AT), then recovered and compared with a replay; killed again during
recovery; and finished. The same program built without its logs must fail somewhere, and the
undo setting (roll back, no re-execution) must hold as well. The ADR half is in bank.c's lit
test (the explorer's x86 model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from crashrun import CRASH_EXIT, count_points, go

ROOT = Path(__file__).resolve().parents[2]
BANK = ROOT / "tests" / "passes" / "clobber" / "bank.c"
TRANSFERS = 10


def build(run, tmp_path: Path, name: str, *extra: str) -> Path:
    exe = tmp_path / name
    r = run(
        "cc", "--mode=clobber", "-O2", "-g", "-mllvm", "-pmkit-clobber-crash-points",
        *extra, str(BANK), "-o", str(exe),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return exe


def crash_points(exe: Path, pool: Path, tmp_path: Path) -> int:
    n = count_points(exe, "run", str(pool), str(TRANSFERS), scratch=tmp_path)
    pool.unlink()
    return n


def crash_everywhere(exe: Path, pool: Path, tmp_path: Path) -> list[str]:
    """Crash at every point in turn; the failures of `check` after recovery."""
    bad = []
    for k in range(1, crash_points(exe, pool, tmp_path) + 1):
        if pool.exists():
            pool.unlink()
        r = go(exe, "run", str(pool), str(TRANSFERS), crash_at=k)
        assert r.returncode in (0, CRASH_EXIT), r.stderr
        c = go(exe, "check", str(pool))
        if c.returncode:
            bad.append(f"crash point {k}: {c.stdout.strip()} {c.stderr.strip()}")
    return bad


@pytest.mark.parametrize("setting", ["clobber", "undo"])
def test_every_crash_point_recovers(run, shm, tmp_path, setting):
    exe = build(run, tmp_path, f"bank-{setting}", f"--clobber-setting={setting}")
    assert crash_everywhere(exe, shm / f"{setting}.pool", tmp_path) == []


def test_a_crash_during_recovery_recovers_again(run, shm, tmp_path):
    exe = build(run, tmp_path, "bank")
    pool = shm / "rec.pool"
    n = crash_points(exe, pool, tmp_path)
    for k in range(7, n, max(1, n // 12)):  # a dozen points spread over the run
        for j in (1, 2, 3, 5, 8):  # early points of recovery itself
            if pool.exists():
                pool.unlink()
            assert go(exe, "run", str(pool), str(TRANSFERS), crash_at=k).returncode in (
                0,
                CRASH_EXIT,
            )
            assert go(exe, "check", str(pool), crash_at=j).returncode in (0, 1, CRASH_EXIT)
            c = go(exe, "check", str(pool))
            assert c.returncode == 0, f"run crash {k}, recovery crash {j}: {c.stdout}"
            # ... and the run then finishes where it left off.
            assert go(exe, "run", str(pool), str(TRANSFERS)).returncode == 0
            c = go(exe, "check", str(pool), str(TRANSFERS))
            assert c.returncode == 0, c.stdout


def test_without_the_logs_crashes_are_caught(run, shm, tmp_path):
    """The oracle bites: the same FASE with its clobber logs left out re-executes on
    overwritten inputs, and check sees it."""
    exe = build(run, tmp_path, "bank-nolog", "-mllvm", "-pmkit-clobber-skip-log")
    bad = crash_everywhere(exe, shm / "nolog.pool", tmp_path)
    assert bad, "a build without clobber logs passed every crash point"


def test_report_names_the_clobber_writes(run, tmp_path):
    r = run("cc", "--mode=clobber", "--report", "-O2", "-c", str(BANK), "-o", str(tmp_path / "b.o"))
    assert r.returncode == 0, r.stderr
    assert "pmkit-clobber: transfer" in r.stderr
    assert "logged: clobbers an input read" in r.stderr
    assert "not logged: memory this FASE allocated" in r.stderr
