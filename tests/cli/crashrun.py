# SPDX-License-Identifier: Apache-2.0
"""Running a program built with crash points (pmkit.h: PMKIT_CRASH_*), for the crash tests of
the failure-atomic modes: crash at the k-th point, at random points, or count the points."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CRASH_EXIT = 86  # PMKIT_CRASH_EXIT: an emulated power failure


def go(
    exe: Path,
    *args: str,
    crash_at: int | None = None,
    seed: int | None = None,
    every: int = 200,
    report: Path | None = None,
    recover: str | None = None,
    points: str | None = None,
) -> subprocess.CompletedProcess:
    """Run exe with crash emulation armed as asked (none by default); `recover` sets
    PMKIT_SSAPP_RECOVER (a deliberately broken recovery, for must-fail cases); `points` sets
    PMKIT_CRASH_POINTS (stores: a crash point before every PM store of a --trace build)."""
    env = dict(os.environ)
    for k in ("PMKIT_CRASH_AT", "PMKIT_CRASH_SEED", "PMKIT_CRASH_EVERY", "PMKIT_CRASH_REPORT",
              "PMKIT_SSAPP_RECOVER", "PMKIT_CRASH_POINTS"):  # fmt: skip
        env.pop(k, None)
    if points is not None:
        env["PMKIT_CRASH_POINTS"] = points
    if recover is not None:
        env["PMKIT_SSAPP_RECOVER"] = recover
    if crash_at is not None:
        env["PMKIT_CRASH_AT"] = str(crash_at)
    if seed is not None:
        env["PMKIT_CRASH_SEED"] = str(seed)
        env["PMKIT_CRASH_EVERY"] = str(every)
    if report is not None:
        env["PMKIT_CRASH_REPORT"] = str(report)
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=120)


def count_points(exe: Path, *args: str, scratch: Path, points: str | None = None) -> int:
    """The crash points an uninterrupted `exe args` passes."""
    rep = scratch / "points"
    r = go(exe, *args, report=rep, points=points)
    assert r.returncode == 0, r.stderr
    return int(rep.read_text().split()[0])
