# SPDX-License-Identifier: Apache-2.0
"""PMKIT_CRASH_POINTS (runtime/core/crash.c): which events are crash points.

tests/runtime/crash_points_pair.c updates a two-word record with two plain stores and no flush,
fence or failure-atomic section. Built with `pmkit cc --trace`, a sweep over every crash point
finds the torn record only when PM stores are crash points: no fence falls between the two
stores, so a fences-only sweep passes every point (why store points are needed). A request for
store points that nothing in the process can count, and an unknown value, stop the program with
exit status 2 and say why.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import BUILD, ROOT, pmkit

SRC = ROOT / "tests" / "runtime" / "crash_points_pair.c"
CRASH_EXIT = 86  # PMKIT_CRASH_EXIT
UPDATES = 5
NEEDS_TRACE = "needs a program built with pmkit cc --trace"


def go(exe: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PMKIT_CRASH_")}
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env={**base, **env}, timeout=60
    )


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("cp") / "pair-traced"
    r = pmkit("cc", "--trace", "-O1", str(SRC), "-o", str(exe))
    assert r.returncode == 0, r.stderr
    return exe


def points(exe: Path, pool: Path, kind: str | None, updates: int) -> int:
    """The crash points of one complete run (PMKIT_CRASH_REPORT)."""
    rep = pool.with_suffix(".points")
    env = {"PMKIT_CRASH_REPORT": str(rep)}
    if kind:
        env["PMKIT_CRASH_POINTS"] = kind
    r = go(exe, "run", str(pool), str(updates), **env)
    assert r.returncode == 0, r.stderr
    pool.unlink()
    n = int(rep.read_text().split()[0])
    rep.unlink()
    return n


def sweep(exe: Path, pool: Path, kind: str, n: int) -> list[int]:
    """Crash at each of points 1..n in turn: the points whose image the check rejects."""
    bad = []
    for k in range(1, n + 1):
        r = go(exe, "run", str(pool), str(UPDATES), PMKIT_CRASH_AT=str(k), PMKIT_CRASH_POINTS=kind)
        assert r.returncode == CRASH_EXIT, f"point {k} of {n}: exit {r.returncode}: {r.stderr}"
        c = go(exe, "check", str(pool))
        assert c.returncode in (0, 1), c.stderr
        if c.returncode:
            bad.append(k)
        pool.unlink()
    return bad


def test_store_points_catch_a_torn_pair_that_fence_points_miss(traced, shm):
    pool = shm / "pair.pool"
    fences0, fences = (points(traced, pool, "fences", u) for u in (0, UPDATES))
    stores0, stores = (points(traced, pool, "stores", u) for u in (0, UPDATES))
    # The default is today's fence points; `all` is both kinds.
    assert points(traced, pool, None, UPDATES) == fences
    assert points(traced, pool, "all", UPDATES) == fences + stores
    # The updates add no fence point and two store points each.
    assert fences == fences0 > 0
    assert stores == stores0 + 2 * UPDATES

    assert sweep(traced, pool, "fences", fences) == []
    bad = sweep(traced, pool, "stores", stores)
    # Exactly the points before each update's second store: a = v, b = v - 1.
    assert len(bad) == UPDATES, bad
    assert bad == list(range(bad[0], bad[0] + 2 * UPDATES, 2))
    # A run past the last point is not cut short, and leaves a whole record.
    r = go(
        traced,
        "run",
        str(pool),
        str(UPDATES),
        PMKIT_CRASH_AT=str(stores + 1),
        PMKIT_CRASH_POINTS="stores",
    )
    assert r.returncode == 0, r.stderr
    assert go(traced, "check", str(pool)).returncode == 0


def test_unknown_value_is_an_error(traced, shm):
    r = go(traced, "run", str(shm / "u.pool"), "1", PMKIT_CRASH_POINTS="store")
    assert r.returncode == 2
    assert "PMKIT_CRASH_POINTS=store: not one of fences, stores, all" in r.stderr
    assert not (shm / "u.pool").exists()


def test_store_points_without_hooks_are_refused(tmp_path, shm):
    """Linked to plain libpmkit (no hooks at all), or to libpmkit-trace without the pass (no
    instrumented code of its own): exit 2 before any store, armed or only counting."""
    paths = json.loads((BUILD / "pmkit-paths.json").read_text())
    cc = ["clang-16", "-O1", f"-I{paths['include']}", str(SRC)]
    plain, uninstrumented = tmp_path / "pair-plain", tmp_path / "pair-uninstrumented"
    for exe, libdir, lib in (
        (plain, paths["libdir"], "-lpmkit"),
        (uninstrumented, paths["tracelibdir"], "-lpmkit-trace"),
    ):
        link = [f"-L{libdir}", f"-Wl,-rpath,{libdir}", lib, "-o", str(exe)]
        subprocess.run([*cc, *link], check=True)
    for exe in (plain, uninstrumented):
        for kind in ("stores", "all"):
            for arm in ({"PMKIT_CRASH_AT": "3"}, {"PMKIT_CRASH_REPORT": str(tmp_path / "r")}):
                r = go(exe, "run", str(shm / "h.pool"), "1", PMKIT_CRASH_POINTS=kind, **arm)
                assert r.returncode == 2, (exe.name, kind, arm, r.stderr)
                assert f"PMKIT_CRASH_POINTS={kind} {NEEDS_TRACE}" in r.stderr
                assert not (tmp_path / "r").exists()
                if (shm / "h.pool").exists():  # created before the check refused it
                    (shm / "h.pool").unlink()
        # Fence points need no hooks, and without crash emulation armed nothing is counted.
        assert (
            go(
                exe,
                "run",
                str(shm / "h.pool"),
                "1",
                PMKIT_CRASH_POINTS="fences",
                PMKIT_CRASH_AT="1000000",
            ).returncode
            == 0
        )
        (shm / "h.pool").unlink()
        assert go(exe, "run", str(shm / "h.pool"), "1", PMKIT_CRASH_POINTS="stores").returncode == 0
        (shm / "h.pool").unlink()
