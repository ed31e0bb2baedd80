# SPDX-License-Identifier: Apache-2.0
"""Odd input and odd ends (issue 23). A file name that is not UTF-8 is a name like any other;
a FIFO where a file is expected makes every command that takes one exit 2 with one line on
stderr naming the path as given, at once (a FIFO is never opened for reading). An explorer
stopped by SIGTERM, SIGINT or SIGHUP removes its work directory in /dev/shm and kills its
checkers; one killed by SIGKILL leaves its directory, which the next run removes, and no run
removes the directory of a live one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BUILD, ROOT
from test_explore import KV, KV_TRACED, OPS, fresh_pool

ENV = dict(os.environ, PYTHONPATH=str(ROOT / "cli"))
CHECK_LIB = BUILD / "tests" / "explorer" / "rare-check.so"


def refused(*args: str | bytes, path: bytes) -> None:
    """`pmkit ARGS` (bytes allowed) exits 2 within 20 s, with one line on stderr naming path."""
    r = subprocess.run(
        [sys.executable, "-m", "pmkit", *args], capture_output=True, env=ENV, timeout=20
    )
    lines = r.stderr.splitlines()
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and b"Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(b"pmkit"), r.stderr
    assert path in lines[0], r.stderr


@pytest.fixture
def fifo(tmp_path):
    f = tmp_path / "f"
    os.mkfifo(f)
    return f


@pytest.mark.parametrize("action", ["info", "check", "gc"])
def test_pool_refuses_a_fifo(fifo, action):
    refused("pool", action, str(fifo), path=bytes(fifo))


@pytest.mark.parametrize("action", ["info", "check", "gc"])
def test_pool_names_not_utf8(tmp_path, action):
    """A file name is bytes: one that is not UTF-8 names a missing pool in one line, exit 2,
    and names a real pool that every command takes."""
    missing = bytes(tmp_path) + b"/\xff.pool"
    refused("pool", action, missing, path=missing)
    there = bytes(tmp_path) + b"/\xfe.pool"
    if not os.path.exists(there):
        pm = [sys.executable, "-m", "pmkit", "pool"]
        r = subprocess.run([*pm, "create", there, "--size", "4M"], capture_output=True, env=ENV)
        assert r.returncode == 0 and there in r.stdout, r
    r = subprocess.run(
        [sys.executable, "-m", "pmkit", "pool", action, there], capture_output=True, env=ENV
    )
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r
    assert action == "info" or there in r.stdout, r.stdout


def test_pool_create_layout_not_utf8(tmp_path):
    refused("pool", "create", str(tmp_path / "l.pool"), "--layout", b"\xff", path=b"\xff")
    assert not (tmp_path / "l.pool").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["explore", "--check", "true {pool}", "--trace"],
        ["explore", "--dump", "--trace"],
        ["sim"],
        pytest.param(
            ["explore", "--check-lib", str(CHECK_LIB), "--image"],
            marks=pytest.mark.skipif(not CHECK_LIB.exists(), reason="needs the pass plugin"),
        ),
    ],
    ids=["explore", "explore-dump", "sim", "explore-image"],
)
def test_tools_refuse_a_fifo_and_take_any_name(fifo, tmp_path, command):
    refused(*command, str(fifo), path=bytes(fifo))
    odd = bytes(tmp_path) + b"/\xff.trace"
    refused(*command, odd, path=odd)


def test_explore_refuses_a_fifo_as_check_library(fifo):
    refused("explore", "--check-lib", str(fifo), "--trace", "x", path=bytes(fifo))


def test_explore_names_the_trace_by_its_program(run):
    """The trace recorded into the work directory is named by its program in messages, not by
    a temporary path, gone once the run ends."""
    writer = 'printf PMKTRACE >"$PMKIT_TRACE"'  # 8 bytes: shorter than a trace header
    r = run("explore", "--check", "true {pool}", "--", "sh", "-c", writer)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "the trace sh wrote is not a pmkit trace" in r.stderr, r.stderr
    assert "pmkit-explore." not in r.stderr


# ---- the explorer's work directory -------------------------------------------------------------

ROOTS = [Path("/dev/shm"), Path("/tmp")]
WORK_ROOT = ROOTS[0] if ROOTS[0].is_dir() else ROOTS[1]


def work_dirs(pid: int) -> list[Path]:
    """The work directories of explorer run `pid` (their names carry it)."""
    return [d for r in ROOTS for d in r.glob(f"pmkit-explore.{pid}-*")]


def start_explore(shm, *args: str) -> subprocess.Popen:
    """`pmkit explore` on a short kvstore run with a slow checker, started in the background
    (stop signals at their defaults, whatever the test runner ignores); returns once it checks
    images in its work directory."""
    pool = fresh_pool(shm, f"odd-{os.getpid()}.pool")
    p = subprocess.Popen(
        [
            sys.executable, "-m", "pmkit", "explore", "--no-progress", *args,
            "--check", f"sleep 0.2; {KV / 'kvstore'} --check {{pool}}",
            "--", str(KV_TRACED), "run", str(pool), *OPS,
        ],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in STOPS],
    )  # fmt: skip
    deadline = time.monotonic() + 20
    try:
        while not any((d / "slot0" / "pool0").exists() for d in work_dirs(p.pid)):
            assert p.poll() is None, p.stderr.read()
            assert time.monotonic() < deadline, "the explorer never started checking"
            time.sleep(0.02)
    except BaseException:
        p.kill()
        p.wait()
        raise
    return p


def processes_naming(text: str) -> list[str]:
    out = []
    for c in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in c.read_bytes():
                out.append(c.parent.name)
        except OSError:
            pass
    return out


STOPS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]

needs_kvstore = pytest.mark.skipif(
    not KV_TRACED.exists(), reason="traced builds need the pass plugin (PMKIT_BUILD_PASSES)"
)


@needs_kvstore
@pytest.mark.parametrize("sig", STOPS, ids=lambda s: s.name)
def test_stopped_explorer_removes_its_work_dir(shm, sig):
    p = start_explore(shm)
    (work,) = work_dirs(p.pid)
    p.send_signal(sig)
    assert p.wait(timeout=20) == -sig, p.stderr.read()
    assert not work.exists()
    assert p.stderr.read() == b""
    # The checkers it killed are gone (a moment after the kill), not still checking images.
    deadline = time.monotonic() + 5
    while processes_naming(work.name) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert processes_naming(work.name) == []


def next_run(tmp_path) -> None:
    """A run of the explorer: it removes what dead runs left, then stops (no such trace)."""
    refused("explore", "--check", "true {pool}", "--trace", str(tmp_path / "none"), path=b"none")


def run_identity(pid: int) -> str:
    """PID-START-NS, as the explorer names a work directory of process `pid`."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    start = stat[stat.rindex(")") + 2 :].split()[19]  # field 22
    ns = os.readlink("/proc/self/ns/pid").split("[")[1].rstrip("]")
    return f"{pid}-{start}-{ns}"


@needs_kvstore
def test_killed_explorer_dir_removed_by_next_run(shm, tmp_path):
    p = start_explore(shm)
    (work,) = work_dirs(p.pid)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=20)
    assert work.is_dir()  # SIGKILL cannot be caught
    next_run(tmp_path)
    assert not work.exists()


def test_live_runs_dirs_survive(tmp_path):
    """Directories whose run may be alive stay: this process's (a live PID, its start time), a
    dead PID's of another PID namespace; one of this PID with another start time (the PID used
    again) goes."""
    me = run_identity(os.getpid())
    pid, start, ns = me.split("-")
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = WORK_ROOT / f"pmkit-explore.{me}.LiVe01"
    other_ns = WORK_ROOT / f"pmkit-explore.{dead.pid}-{start}-{int(ns) + 1}.OtHeR1"
    reused = WORK_ROOT / f"pmkit-explore.{pid}-{int(start) + 1}-{ns}.ReUsE1"
    made = [live, other_ns, reused]
    try:
        for d in made:
            (d / "slot0").mkdir(parents=True)
        next_run(tmp_path)
        assert live.is_dir() and other_ns.is_dir()
        assert not reused.exists()
    finally:
        for d in made:
            if d.exists():
                (d / "slot0").rmdir()
                d.rmdir()
