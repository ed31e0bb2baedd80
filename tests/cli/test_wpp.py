# SPDX-License-Identifier: Apache-2.0
"""WPP mode (runtime/wpp, `pmkit wpp`): the golden-output suite at quick size (every program x 3
trials, each with 1-3 power failures and at least one restore), the cases that must fail (a
restore that drops pipe bytes, sleeps cut short, vector registers lost), bad input (another
binary's context, a corrupt or half-written one, a busy one, a missing directory, fork and
exec), and the command itself (run, kill, info)."""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import wppgolden as g

pytestmark = pytest.mark.skipif(not Path("/usr/bin/musl-gcc").exists(), reason="no musl-gcc")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    # contexts and programs on tmpfs, as in use
    d = Path("/dev/shm") / f"pmkit-test-wpp-{os.getpid()}"
    d.mkdir()
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


def test_golden_quick(work):
    s = g.campaign(list(g.PROGRAMS), None, seed=7, workdir=work / "golden", log=lambda *_: None)
    total = sum(v["trials"] for v in s.values())
    assert total == sum(p.quick for p in g.PROGRAMS.values())
    for name, v in s.items():
        assert v["passed"] == v["trials"], (name, v["problems"])
        assert v["restores"] >= v["trials"], name


def test_kv_server_keeps_acknowledged_writes(work):
    """The TCP key-value server (epoll, a mutex per stripe) power-failed 1-3 times while a
    client drives it: every acknowledged write is there, the client reconnects, the server ends
    cleanly."""
    d = work / "kv"
    d.mkdir()
    server, client = g.build_kv(d)
    rng = random.Random(5)
    for _ in range(3):
        ok, restores, why = g.kv_trial(server, client, d, rng)
        assert ok, why
        assert restores >= 1 and '"lost": 0' in why
    # the control: the same server restarted without WPP loses acknowledged writes, and the
    # client notices
    ok, restores, why = g.kv_trial(server, client, d, rng, persist=False)
    assert not ok and restores >= 1
    assert '"lost": 0' not in why and '"lost": ' in why, why


def _broken_trials(work: Path, name: str, knob: str, n: int) -> list[g.Trial]:
    """Up to n trials with a broken restore; stops at the first one the harness catches."""
    scratch = work / f"broken-{knob}"
    scratch.mkdir(exist_ok=True)
    exe = g.build(name, scratch)
    want, runtime = g.native(exe, name, scratch)
    os.environ["PMKIT_WPP_BREAK"] = knob
    try:
        rng = random.Random(11)
        out = []
        while len(out) < n and not (out and out[-1].restores and not out[-1].ok):
            out.append(g.restored_trial(exe, name, want, runtime, scratch, rng))
        return out
    finally:
        del os.environ["PMKIT_WPP_BREAK"]


@pytest.mark.parametrize(
    "name,knob,why",
    [
        ("pipe", "pipes", "stdout differs"),
        ("sleepenv", "sleep", "stdout differs"),
        ("owners", "owners", "hung"),
        # kernel objects: each rebuilt wrong in the way a restore without it would be
        # counters rebuilt at zero: the reader stalls
        ("eventfd", "eventfd", "stdout differs"),
        ("timerfd", "timerfd", "timerfd stalled"),  # rebuilt disarmed
        ("timerfd", "eintr", "timerfd stalled"),  # a poll the save interrupted returns EINTR
        ("signalfd", "signalfd", "stdout differs"),  # rebuilt with an empty mask
        ("ptimer", "ptimers", "stdout differs"),  # POSIX timers not made again
        ("dupfd", "dups", "in_order="),  # dups reopened as separate files
        ("flock", "locks", "flock=0"),  # locks not taken again
        ("fmap", "maps", "exit -11"),  # file mappings not made again
        # socket pairs back as dead sockets: a reader sees end of file, a writer EPIPE
        ("sockpair", "sockpairs", "ended early|send failed|no acknowledgement|gram at|ket at"),
        # rebuilt without their queued bytes: a record or a message is missing, or an
        # acknowledgement never comes
        ("sockpair", "sockbytes", "wrong record|gram at|ket at|hung"),
        # datagram sockets back as dead sockets: a send or a receive fails
        ("udp", "dgrams", "send failed|receive failed|answer failed"),
    ],
)
def test_broken_restore_is_caught(work, name, knob, why):
    """The harness sees each deliberately broken restore, for the reason meant: bytes left in a
    pipe dropped, a sleep ended early, the owner of a held lock left at a thread id that no
    longer exists (a hang), and each kernel object rebuilt wrong."""
    trials = _broken_trials(work, name, knob, 3)
    caught = [t for t in trials if t.restores and not t.ok]
    assert caught, [t.why for t in trials]
    assert all(any(w in t.why for w in why.split("|")) for t in caught), [t.why for t in caught]


def test_lost_vector_registers_are_caught(work):
    """Zeroing the saved vector registers breaks the floating point of some trial (a thread
    stopped in a system call has no live vector registers, so not every trial)."""
    trials = _broken_trials(work, "compute", "fpu", 8)
    assert any(t.restores and not t.ok for t in trials), [t.why for t in trials]


# ---- bad input ----------------------------------------------------------------------------


def _run(exe: Path, ctx: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, **kw)


def _saved_context(exe: Path, ctx: Path, *args: str) -> None:
    """Run (or resume) exe under WPP and power-fail it once it has been running a while."""
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    p = subprocess.Popen([str(exe), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    time.sleep(0.3)
    p.send_signal(signal.SIGPWR)
    p.communicate(timeout=30)
    assert p.returncode == g.SAVED_EXIT
    assert (ctx / "wpp.ctx").exists()


def _head(f: Path) -> bytes:
    with open(f, "rb") as fh:  # the file is sparse and 32 GiB long
        return fh.read(1 << 20)


@pytest.fixture(scope="module")
def progs(work) -> dict[str, Path]:
    d = work / "progs"
    d.mkdir()
    return {n: g.build(n, d) for n in ("compute", "churn")}


def test_context_of_another_binary_is_refused(work, progs):
    ctx = work / "other"
    _saved_context(progs["compute"], ctx, "2", "400")
    before = _head(ctx / "wpp.ctx")
    r = _run(progs["churn"], ctx)
    assert r.returncode == 2
    assert "saved by another executable" in r.stderr
    assert _head(ctx / "wpp.ctx") == before  # nothing lost
    r = _run(progs["compute"], ctx, "2", "400", timeout=60)  # the right one still resumes
    assert r.returncode == 0, r.stderr
    assert "counter=" in r.stdout


@pytest.mark.parametrize(
    "damage,message",
    [
        ("magic", "is not a WPP context"),
        ("init", "half-written"),
        ("running", "ended without a save"),
        ("short", "too short"),
    ],
)
def test_corrupt_context_is_refused(work, progs, damage, message):
    ctx = work / f"corrupt-{damage}"
    _saved_context(progs["compute"], ctx, "2", "400")
    f = ctx / "wpp.ctx"
    if damage == "short":
        f.unlink()
        f.write_bytes(b"PMKWPP01")
    else:
        with open(f, "r+b") as fh:
            if damage == "magic":
                fh.write(b"garbage!")
            else:
                fh.seek(12)
                fh.write(struct.pack("<i", {"init": 1, "running": 2}[damage]))
    r = _run(progs["compute"], ctx, "2", "400", timeout=30)
    assert r.returncode == 2
    assert message in r.stderr, r.stderr
    assert f.exists()  # left for the user to inspect or remove


def test_missing_directory(work, progs):
    r = _run(progs["compute"], work / "no" / "such" / "dir", "1", "1")
    assert r.returncode == 2
    assert "cannot create the context directory" in r.stderr
    assert "No such file or directory" in r.stderr


def test_busy_context_is_refused(work, progs):
    ctx = work / "busy"
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    p = subprocess.Popen(
        [str(progs["compute"]), "2", "2000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        time.sleep(0.3)
        r = _run(progs["compute"], ctx, "2", "2000", timeout=30)
        assert r.returncode == 2
        assert "in use by another process" in r.stderr
    finally:
        p.kill()
        p.communicate()


@pytest.mark.parametrize(
    "mode", ["tls", "cancel", "exitmain", "pipe", "sigpipe", "eintr", "pending"]
)
def test_edges(work, mode):
    """Cases a review found broken (tests/wpp/edges.c): power-failed once in the middle, the
    resumed program ends as the native one does, with the same output."""
    r, native = _edge(work, mode)
    assert (r.returncode, r.stdout) == (native.returncode, native.stdout.decode()), r.stderr


@pytest.mark.parametrize(
    "mode",
    ["closed", "dgram", "shut", "seqshut", "unbound", "epoll", "highfd", "dual", "mode", "redir"]
    + ["bigsend", "tmpfile"],
)
def test_socket_edges(work, mode):
    """Socket and descriptor states a review found lost (tests/wpp/sockedge.c): a pair whose
    writer closed with data unread, a shut-down half, a message socket shut down beside a full
    pipe, sockets not yet listening, 200 epoll registrations, descriptors above 600, a dual-stack
    listener pair, a socket file's mode, stdout pointed into a pipe with the real one kept as a
    dup, a blocking send the save cuts short, a deleted temporary file on another file system.
    Power-failed once in the middle, the resumed
    program prints what the native one prints."""
    r, native = _edge(work, mode, "sockedge")
    assert (r.returncode, r.stdout) == (native.returncode, native.stdout.decode()), r.stderr


@pytest.mark.parametrize("mode,knob", [("eintr", "eintr"), ("pending", "signals")])
def test_edges_broken(work, mode, knob):
    """The same edges with the restore broken: a poll the save interrupted returns EINTR, the
    signals pending at the failure are not sent again. The output must differ."""
    os.environ["PMKIT_WPP_BREAK"] = knob
    try:
        r, native = _edge(work, mode)
    finally:
        del os.environ["PMKIT_WPP_BREAK"]
    assert r.returncode == 0 and r.stdout != native.stdout.decode(), r


def _edge(work: Path, mode: str, prog: str = "edges"):
    d = work / prog
    d.mkdir(exist_ok=True)
    exe = d / prog
    if not exe.exists():
        subprocess.run(
            g.pmkit("wpp", "cc", str(g.SOURCES / f"{prog}.c"), "-o", str(exe)), check=True
        )
    native = subprocess.run([str(exe), mode], capture_output=True, timeout=30)
    ctx = d / f"ctx-{mode}"
    _saved_context(exe, ctx, mode)
    r = _run(exe, ctx, mode, timeout=30)
    if r.returncode != native.returncode or r.stdout != native.stdout.decode():
        return r, native
    if native.returncode >= 0:
        assert not list(ctx.iterdir())
    else:  # killed by a signal, like a kill: the context is not resumable
        again = _run(exe, ctx, mode, timeout=30)
        assert again.returncode == 2 and "ended without a save" in again.stderr
    return r, native


def test_sigterm_ends_the_program(work, progs):
    """SIGTERM still ends a program that keeps its default action (the program runs as pid 1 of
    its namespace, which would ignore it); that is a kill, not a power failure: nothing saved."""
    ctx = work / "term"
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    p = subprocess.Popen([str(progs["compute"]), "2", "2000"], stderr=subprocess.PIPE, env=env)
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGTERM
    r = _run(progs["compute"], ctx, "2", "2000", timeout=30)
    assert r.returncode == 2 and "ended without a save" in r.stderr


def _build_c(work: Path, name: str, source: str) -> Path:
    """A program of the test's own, written to work/NAME.c and built with pmkit wpp cc."""
    src, exe = work / f"{name}.c", work / name
    src.write_text(source)
    subprocess.run(g.pmkit("wpp", "cc", str(src), "-o", str(exe)), check=True)
    return exe


def test_cc_names_musl_as_its_target():
    """A configure that checks the compiler's multiarch against the triplet its headers give
    (CPython's) must hear musl's: gcc, under musl-gcc, answers for glibc."""
    for flag in ("-print-multiarch", "--print-multiarch"):
        r = subprocess.run(g.pmkit("wpp", "cc", flag), capture_output=True, text=True)
        assert (r.returncode, r.stdout) == (0, "x86_64-linux-musl\n"), r.stderr
    gcc = subprocess.run(["musl-gcc", "-print-multiarch"], capture_output=True, text=True)
    assert gcc.stdout == "x86_64-linux-gnu\n"  # what the test exists for: gcc's glibc answer


def test_cc_finds_pmkit_headers_after_the_programs(work):
    """A program written for the other modes keeps its annotations under WPP: pmkit wpp cc
    finds <pmkit/pmkit.h> (it did not, and the tutorial's tally.c did not build), after the
    program's own include folders (a header of the program's named like one of pmkit's wins)."""
    exe = _build_c(
        work,
        "annotated",
        "#include <pmkit/pmkit.h>\n#include <stdio.h>\n"
        "static long n;\nPMKIT_FASE static void add(long v) { n += v; }\n"
        'int main(void) { add(41); add(1); printf("%ld\\n", n); return 0; }\n',
    )
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout == "42\n"
    own = work / "own" / "pmkit"
    own.mkdir(parents=True)
    (own / "pmkit.h").write_text("#define OWN_HEADER 1\n")
    src = work / "own.c"
    src.write_text("#include <pmkit/pmkit.h>\n#ifndef OWN_HEADER\n#error pmkit's\n#endif\n"
                   "int main(void) { return 0; }\n")  # fmt: skip
    r = subprocess.run(g.pmkit("wpp", "cc", f"-I{work / 'own'}", "-c", str(src), "-o",
                               str(work / "own.o")), capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_run_refuses_a_program_without_the_runtime(work):
    """`pmkit wpp run` of an ordinary build ran it with nothing persistent and exited 0, as if
    it had worked; a path given to kill or info was answered about a default folder of its
    last component. Now the first is refused and the others name the path given."""
    plain = work / "plain"
    (work / "plain.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["cc", str(work / "plain.c"), "-o", str(plain)], check=True)
    ctx = work / "plain-ctx"
    r = subprocess.run(g.pmkit("wpp", "run", "--context", str(ctx), "--", str(plain)),
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 2 and "has no WPP runtime" in r.stderr, r.stderr
    assert not (ctx / "wpp.ctx").exists()
    empty = work / "empty-ctx"
    empty.mkdir()
    for action in ("kill", "info"):
        r = subprocess.run(g.pmkit("wpp", action, str(empty)), capture_output=True, text=True)
        assert r.returncode == 2 and str(empty) in r.stderr, r.stderr


def test_fork_and_exec_fail_loudly(work):
    exe = _build_c(
        work,
        "forker",
        "#include <errno.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
        "int main(void) {\n"
        '  pid_t p = fork(); printf("fork %d %d\\n", (int)p, p < 0 ? errno == ENOTSUP : 0);\n'
        '  int s = system("true"); printf("system %d\\n", s);\n'
        '  execl("/bin/true", "true", (char *)0); printf("exec %d\\n", errno == ENOTSUP);\n'
        "  return 0;\n}\n",
    )
    r = _run(exe, work / "forker-ctx")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["fork -1 1", "system -1", "exec 1"]
    assert "fork is not supported" in r.stderr
    assert not list((work / "forker-ctx").iterdir())
    native = subprocess.run([str(exe)], capture_output=True, text=True)  # without WPP: real calls
    assert native.returncode == 0 and "not supported" not in native.stderr


def test_what_cannot_come_back_is_said_at_creation(work):
    """inotify, memfd, System V IPC and a pidfd made through syscall() work under WPP, and the
    program is warned when it makes one (once per kind), not after a restore; a raw fork
    through syscall() fails as fork does. Natively nothing is said and the fork happens."""
    exe = _build_c(
        work,
        "unkept",
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <sys/inotify.h>\n"
        "#include <sys/ipc.h>\n#include <sys/mman.h>\n#include <sys/sem.h>\n"
        "#include <sys/shm.h>\n#include <sys/syscall.h>\n#include <sys/wait.h>\n"
        "#include <unistd.h>\n"
        "int main(void) {\n"
        '  int a = inotify_init1(0), b = inotify_init1(0), m = memfd_create("x", 0);\n'
        "  int s = semget(IPC_PRIVATE, 1, 0600), h = shmget(IPC_PRIVATE, 4096, 0600);\n"
        "  int p = (int)syscall(SYS_pidfd_open, getpid(), 0);\n"
        "  semctl(s, 0, IPC_RMID); shmctl(h, IPC_RMID, 0);\n"
        '  printf("%d %d %d %d %d %d\\n", a >= 0, b >= 0, m >= 0, s >= 0, h >= 0, p >= 0);\n'
        "  fflush(stdout);\n"
        "  long f = syscall(SYS_fork);\n"
        "  if (f == 0) _exit(0);\n"
        "  if (f > 0) waitpid((int)f, NULL, 0);\n"
        '  printf("raw fork: %s\\n", f > 0 ? "forked" : "refused");\n'
        "  return 0;\n}\n",
    )
    r = _run(exe, work / "unkept-ctx")
    assert r.returncode == 0 and r.stdout == "1 1 1 1 1 1\nraw fork: refused\n", r
    said = [ln for ln in r.stderr.splitlines() if "cannot come back after a power failure" in ln]
    assert len(said) == 5, r.stderr  # inotify once for two, memfd, semget, shmget, pidfd
    assert all(w in r.stderr for w in ("inotify", "memfd", "semget", "shmget", "pidfd")), r
    assert "a raw fork or clone (syscall) is not supported" in r.stderr, r.stderr
    native = subprocess.run([str(exe)], capture_output=True, text=True)
    assert native.stdout == "1 1 1 1 1 1\nraw fork: forked\n" and not native.stderr, native


def test_what_comes_back_dead_is_said_at_the_save(work):
    """A descriptor the restore cannot rebuild and that nothing warned of at creation (here a
    netlink socket) is named at the save, and comes back as a socket whose peer has gone."""
    exe = _build_c(
        work,
        "netlink",
        "#include <stdio.h>\n#include <sys/socket.h>\n#include <unistd.h>\n"
        "int main(void) {\n"
        "  int s = socket(AF_NETLINK, SOCK_RAW, 0);\n"
        "  for (int i = 0; i < 300; i++) usleep(10000);\n"
        "  char c;\n"
        '  printf("netlink %d, read %zd\\n", s >= 0, read(s, &c, 1));\n'
        "  return 0;\n}\n",
    )
    ctx = work / "netlink-ctx"
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    p = subprocess.Popen([str(exe)], stderr=subprocess.PIPE, env=env, text=True)
    time.sleep(0.5)
    p.send_signal(signal.SIGPWR)
    err = p.communicate(timeout=30)[1]
    assert p.returncode == g.SAVED_EXIT, err
    assert "(socket:" in err and "not IP or Unix) cannot come back" in err, err
    r = _run(exe, ctx, timeout=60)
    assert r.returncode == 0 and r.stdout == "netlink 1, read 0\n", r


def test_failure_handler(work):
    """The program's SIGPWR handler runs once per restore, never at the failure itself, and may
    end the program."""
    d = work / "handler"
    d.mkdir()
    exe = d / "handler"
    subprocess.run(g.pmkit("wpp", "cc", str(g.SOURCES / "handler.c"), "-o", str(exe)), check=True)
    assert (
        subprocess.run([str(exe)], capture_output=True).stdout == b"handler calls=0 progress=59\n"
    )
    ctx = d / "ctx"
    _saved_context(exe, ctx)
    _saved_context(exe, ctx)  # resumed, then power-failed again
    r = _run(exe, ctx, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "handler calls=2 progress=59\n"
    ctx2 = d / "ctx2"
    _saved_context(exe, ctx2, "exit")
    r = _run(exe, ctx2, "exit", timeout=30)
    assert r.returncode == 3 and r.stdout == "handler exits after 1 call(s)\n", r.stderr
    assert not list(ctx2.iterdir())


# ---- the command ---------------------------------------------------------------------------


def test_run_kill_info_resume(work, progs):
    ctx = work / "cli"
    env = dict(os.environ)
    run = g.pmkit("wpp", "run", "--context", str(ctx), "--", str(progs["compute"]), "2", "400")
    p = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 10
    while not (ctx / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    k = subprocess.run(
        g.pmkit("wpp", "kill", "--context", str(ctx)), capture_output=True, text=True
    )
    assert k.returncode == 0, k.stderr
    out1, err1 = p.communicate(timeout=30)
    assert p.returncode == g.SAVED_EXIT
    assert b"state is saved" in err1
    i = subprocess.run(g.pmkit("wpp", "info", "--json", str(ctx)), capture_output=True, text=True)
    assert i.returncode == 0, i.stderr
    assert '"state": "SAVED"' in i.stdout
    r = subprocess.run(run, capture_output=True, env=env, timeout=60)
    assert r.returncode == 0
    assert b"resuming from" in r.stderr
    native = subprocess.run([str(progs["compute"]), "2", "400"], capture_output=True)
    assert out1 + r.stdout == native.stdout
    assert not list(ctx.iterdir())
    bad = subprocess.run(g.pmkit("wpp", "kill", "--context", str(ctx)), capture_output=True)
    assert bad.returncode == 2 and b"no program is running" in bad.stderr
    # killed without a save: info says it cannot be resumed (it said RUNNING, as if it ran)
    p = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    while not (ctx / "pid").exists() and time.monotonic() < deadline + 20:
        time.sleep(0.02)
    live = subprocess.run(g.pmkit("wpp", "info", str(ctx)), capture_output=True, text=True)
    subprocess.run(["pkill", "-KILL", "-f", f"{progs['compute']} 2 400"])
    p.wait(timeout=30)
    dead = subprocess.run(g.pmkit("wpp", "info", str(ctx)), capture_output=True, text=True)
    assert "RUNNING," in live.stdout and "no program runs" not in live.stdout, live
    assert "RUNNING but no program runs in it" in dead.stdout, dead


def test_second_start_is_refused_and_harmless(work, progs):
    """20 starts on a context a program runs in: each is refused at once (exit 2, naming the
    running pid and --context), none hangs, and the running program's pid file is left as it
    was, so that `pmkit wpp kill PROG` still reaches it, though it was started with a context
    of its own."""
    ctx = work / "second"
    exe = progs["compute"]
    env = dict(os.environ, PMKIT_WPP_QUIET="1")
    run = g.pmkit("wpp", "run", "--context", str(ctx), "--", str(exe), "2", "3000")
    p = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 10
        while not (ctx / "pid").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        pid = (ctx / "pid").read_text()
        for _ in range(20):
            r = subprocess.run(run, capture_output=True, text=True, env=env, timeout=10)
            assert r.returncode == 2, r
            assert f"in use by another process (pid {pid.strip()})" in r.stderr, r.stderr
            assert "--context" in r.stderr
            assert (ctx / "pid").read_text() == pid
        # --fresh on a context in use is refused too, and removes nothing (it once deleted
        # the running program's context, whose next save then resumed as a fresh start)
        ino = (ctx / "wpp.ctx").stat().st_ino
        fresh = g.pmkit("wpp", "run", "--fresh", "--context", str(ctx), "--", str(exe), "2")
        r = subprocess.run(fresh, capture_output=True, text=True, env=env, timeout=10)
        assert r.returncode == 2 and f"in use by pid {pid.strip()}" in r.stderr, r
        assert (ctx / "wpp.ctx").stat().st_ino == ino
        k = subprocess.run(g.pmkit("wpp", "kill", exe.name), capture_output=True, text=True)
        assert k.returncode == 0 and f"pid {pid.strip()}" in k.stdout, k
        p.communicate(timeout=30)
        assert p.returncode == g.SAVED_EXIT
    finally:
        p.kill()
        p.communicate()
    # a program refused after the fork ends at once: its supervisor must end with it (it once
    # waited forever for a SIGCHLD that came before it listened)
    other = g.pmkit("wpp", "run", "--context", str(ctx), "--", str(progs["churn"]), "10")
    for _ in range(20):
        r = subprocess.run(other, capture_output=True, text=True, env=env, timeout=10)
        assert r.returncode == 2 and "another executable" in r.stderr, r


def test_resume_with_other_arguments_warns(work, progs):
    """A resumed program keeps the arguments it started with; other ones given to the resuming
    command are ignored, with a warning (and none when they are the same)."""
    exe, ctx = progs["compute"], work / "args"
    _saved_context(exe, ctx, "2", "400")
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    p = subprocess.Popen([str(exe), "2", "9"], stderr=subprocess.PIPE, env=env, text=True)
    time.sleep(0.3)
    p.send_signal(signal.SIGPWR)
    err = p.communicate(timeout=30)[1]
    assert "resumes with the arguments it started with" in err, err
    r = _run(exe, ctx, "2", "400", timeout=60)
    assert r.returncode == 0 and "arguments" not in r.stderr, r.stderr


@pytest.fixture
def small_fs(work):
    """A 48 MiB tmpfs of the test's own (needs root, as the tests run)."""
    d = work / "small"
    d.mkdir(exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(d)])
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    yield d
    subprocess.run(["umount", "-l", str(d)])


def test_full_file_system_fails_allocations_not_the_program(work, small_fs):
    """On a full file system an allocation fails (malloc returns NULL) instead of a store
    killing the program with SIGBUS; a power failure after that is saved and resumed, and the
    program ends with every block intact. A fresh start on a full file system is refused with a
    message, and leaves no context behind."""
    exe = work / "fill"
    subprocess.run(
        g.pmkit("wpp", "cc", "-O2", str(g.SOURCES / "fill.c"), "-o", str(exe)), check=True
    )
    ctx = small_fs / "ctx"
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    # must fail: without file space reserved up front, the full file system is a SIGBUS
    broken = subprocess.run(
        [str(exe)], capture_output=True, env=dict(env, PMKIT_WPP_BREAK="reserve"), timeout=30
    )
    assert broken.returncode == -signal.SIGBUS, broken
    subprocess.run(["rm", "-rf", str(ctx)], check=True)
    p = subprocess.Popen(
        [str(exe), "3000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    line = p.stdout.readline().decode()
    assert line.startswith("full after ") and 20 < int(line.split()[2]) < 48, line
    p.send_signal(signal.SIGPWR)
    out, err = p.communicate(timeout=30)
    assert p.returncode == g.SAVED_EXIT, err
    r = _run(exe, ctx, "3000", timeout=30)
    assert r.returncode == 0 and r.stdout == "done: 0 blocks damaged\n", r
    # full before the start: refused, nothing left
    with open(small_fs / "filler", "wb") as f:
        try:
            while True:
                f.write(b"x" * (1 << 20))
                f.flush()
        except OSError:
            pass
    r = _run(exe, ctx, timeout=30)
    assert r.returncode == 2 and "No space left on device" in r.stderr, r
    assert not (ctx / "wpp.ctx").exists()


def test_kill_right_after_start(work, progs):
    """A power failure sent in the first milliseconds of a (re)start reaches the program: the
    kill waits for its pid file, and the program, which blocks SIGPWR until it can save, saves
    as soon as it can."""
    ctx = work / "early"
    run = g.pmkit("wpp", "run", "--context", str(ctx), "--", str(progs["compute"]), "2", "3000")
    env = dict(os.environ, PMKIT_WPP_QUIET="1")
    for _ in range(3):
        p = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        k = subprocess.run(
            g.pmkit("wpp", "kill", "--context", str(ctx)), capture_output=True, text=True
        )
        assert k.returncode == 0, k.stderr
        p.communicate(timeout=30)
        assert p.returncode == g.SAVED_EXIT, p.returncode
    r = subprocess.run(run, capture_output=True, env=env, timeout=60)
    assert r.returncode == 0 and not list(ctx.iterdir())


def test_native_run_ignores_wpp(work, progs):
    """Without PMKIT_WPP_CONTEXT the same binary runs as a plain program (the baseline)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMKIT_WPP")}
    r = subprocess.run([str(progs["compute"]), "1", "5"], capture_output=True, env=env)
    assert r.returncode == 0 and r.stdout.startswith(b"threads=1")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
