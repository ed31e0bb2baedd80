# SPDX-License-Identifier: Apache-2.0
"""The WPP golden-output harness: run a program natively, then under WPP with 1-3 power failures
(SIGPWR) at random times per trial, and require byte-identical stdout, exit status 0, an empty
context directory and at least one real restore. Used by tests/cli/test_wpp.py (the quick suite)
and, as a script, by `make crashtest-full`:

    python tests/cli/wppgolden.py --trials 200 [--programs compute,pipe] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SAVED_EXIT = 86  # WPP_EXIT_SAVED (runtime/wpp/wpp.h)
ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "tests" / "wpp"


@dataclass
class Program:
    name: str
    args: list[str] = field(default_factory=list)
    libs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120  # a run longer than this is a hang
    quick: int = 3  # trials in the quick suite (make test)


# {out} in an argument is replaced by a file in the trial's scratch directory.
PROGRAMS = {
    "compute": Program("compute", ["2", "150"], ["-lm"]),
    "churn": Program("churn", ["1500"]),
    "stdio": Program("stdio", ["{out}", "8000"]),
    "pipe": Program("pipe", ["2000000"]),
    "sleepenv": Program("sleepenv", ["4"], env={"SLEEPENV_TAG": "golden"}),
    # without a pid namespace: thread ids are kept by clone3(set_tid) in the machine's own
    # namespace (this needs root, as the tests run)
    "owners": Program("owners", ["{out}", "400000"], env={"PMKIT_WPP_NO_NS": "1"}, timeout=10),
    # kernel objects rebuilt at a restore; each program notices a lost one by itself (a stall
    # of a few seconds, a wrong count) and says so on stdout
    "eventfd": Program("eventfd", timeout=10, quick=2),
    "timerfd": Program("timerfd", timeout=10, quick=2),
    "signalfd": Program("signalfd", timeout=10, quick=2),
    "ptimer": Program("ptimer", timeout=10, quick=2),
    "dupfd": Program("dupfd", ["{out}"], timeout=10, quick=2),
    "flock": Program("flock", ["{out}"], timeout=10, quick=2),
    "fmap": Program("fmap", ["{out}"], timeout=10, quick=2),
    "sockpair": Program("sockpair", timeout=10, quick=2),
    "udp": Program("udp", ["{out}"], timeout=10, quick=2),
}


def pmkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "pmkit", *args]


def build(name: str, outdir: Path) -> Path:
    prog = PROGRAMS[name]
    exe = outdir / name
    cmd = pmkit("wpp", "cc", "-O2", "-Wall", str(SOURCES / f"{name}.c"), "-o", str(exe))
    subprocess.run([*cmd, *prog.libs], check=True, capture_output=True, text=True)
    return exe


@dataclass
class Trial:
    ok: bool
    restores: int
    failures_sent: int
    why: str = ""


def _argv(exe: Path, prog: Program, scratch: Path) -> list[str]:
    return [str(exe), *(a.replace("{out}", str(scratch / "out")) for a in prog.args)]


def native(exe: Path, name: str, scratch: Path) -> tuple[bytes, float]:
    """The reference output and run time, without WPP."""
    prog = PROGRAMS[name]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMKIT_WPP")}
    env.update(prog.env)
    t0 = time.monotonic()
    r = subprocess.run(_argv(exe, prog, scratch), capture_output=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout, time.monotonic() - t0


def trial(
    exe: Path,
    name: str,
    want: bytes,
    runtime: float,
    scratch: Path,
    rng: random.Random,
    scale: float = 1.0,
    persist: bool = True,
) -> Trial:
    """One trial: k in 1..3 failures, each at a random point of the remaining run (of the
    native run time times `scale`). persist=False is the control: the program runs without
    WPP, so a failure kills it and the next run starts over (its output must differ)."""
    prog = PROGRAMS[name]
    ctx = scratch / "ctx"
    shutil.rmtree(ctx, ignore_errors=True)
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1", **prog.env)
    if not persist:
        env = {k: v for k, v in env.items() if not k.startswith("PMKIT_WPP")}
    stopped = SAVED_EXIT if persist else -signal.SIGPWR
    k = rng.randint(1, 3)
    out, restores, sent, rc, errs = b"", 0, 0, None, b""
    for _ in range(k + 20):
        p = subprocess.Popen(
            _argv(exe, prog, scratch), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        if sent < k:
            try:
                p.wait(timeout=rng.uniform(0.05, 0.8) * runtime * scale + 0.02)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGPWR)
                sent += 1
        try:
            o, e = p.communicate(timeout=prog.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
            return Trial(False, restores, sent, f"hung; stderr: {e.decode()[-300:]}")
        out += o
        errs += e
        rc = p.returncode
        if rc != stopped:
            break
        restores += 1
    left = sorted(x.name for x in ctx.iterdir()) if ctx.exists() else []
    if rc != 0:
        return Trial(
            False,
            restores,
            sent,
            f"exit {rc}; stdout ends {out[-120:]!r}; stderr: {errs.decode()[-400:]}",
        )
    if out != want:
        return Trial(False, restores, sent, f"stdout differs: {out[-200:]!r} vs {want[-200:]!r}")
    if left:
        return Trial(False, restores, sent, f"context not empty: {left}")
    return Trial(True, restores, sent)


def restored_trial(exe, name, want, runtime, scratch, rng, persist: bool = True) -> Trial:
    """A trial that had a restore, or failed: one whose program ended before the failure
    came is run again, up to 3 times, with the failures drawn from a half, a quarter and an
    eighth of the run (the native run may have been slower, on a loaded machine)."""
    for attempt in range(4):
        t = trial(exe, name, want, runtime, scratch, rng, 0.5**attempt, persist)
        if not t.ok or t.restores:
            break
    return t


def campaign(names: list[str], trials: int | None, seed: int, workdir: Path, log=print) -> dict:
    """trials per program, each with a real restore (restored_trial)."""
    rng = random.Random(seed)
    summary = {}
    for name in names:
        scratch = workdir / name
        scratch.mkdir(parents=True, exist_ok=True)
        exe = build(name, scratch)
        want, runtime = native(exe, name, scratch)
        good = restores = failures = 0
        bad = []
        n = trials or PROGRAMS[name].quick
        for _ in range(n):
            t = restored_trial(exe, name, want, runtime, scratch, rng)
            restores += t.restores
            failures += t.failures_sent
            if t.ok and t.restores:
                good += 1
            else:
                bad.append(t.why or "no restore happened")
        summary[name] = {
            "trials": n,
            "passed": good,
            "restores": restores,
            "failures_sent": failures,
            "native_seconds": round(runtime, 3),
            "problems": bad[:5],
        }
        log(f"{name}: {good}/{n} trials passed, {restores} restores")
    return summary


# ---- the key-value server ------------------------------------------------------------------

KV = ROOT / "bench" / "kvserver"


def build_kvclient(outdir: Path) -> Path:
    """kvserver's load client and checker (bench/kvserver/kvclient.c), with the system compiler
    (glibc)."""
    client = outdir / "kvclient"
    cc = shutil.which("cc") or "gcc"
    subprocess.run(
        [cc, "-O2", "-pthread", str(KV / "kvclient.c"), "-o", str(client)],
        check=True,
        capture_output=True,
    )
    return client


def build_kv(outdir: Path) -> tuple[Path, Path]:
    """kvserver under WPP (pmkit wpp cc) and its client."""
    server = outdir / "kvserver"
    subprocess.run(
        pmkit("wpp", "cc", "-O2", str(KV / "kvserver.c"), "-o", str(server)),
        check=True,
        capture_output=True,
    )
    return server, build_kvclient(outdir)


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its descendants (a WPP program runs as the
    child of its supervisor), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            for t in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (t / "children").read_text().split()]
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, seconds: float = 20) -> None:
    """Until something accepts connections at the port (or the process ended)."""
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"nothing listens at port {port} (exit status {proc.poll()})")


def kv_trial(
    server: Path,
    client: Path,
    scratch: Path,
    rng: random.Random,
    ops: int = 40000,
    persist: bool = True,
    check=None,
    stop_with_term: bool = False,
    server_args: list[str] | None = None,
    client_args: tuple[str, ...] = (),
):
    """The server under WPP, a client of 4 connections driving it, 1-3 power failures at
    random times, the server restarted after each. Returns (ok, restores, why): the client
    must find every acknowledged write, and the server must end cleanly with an empty context.
    persist=False runs the server without WPP (the control: a restart starts empty).
    check(port, pid) runs once the client is done, before the server is stopped, and returns
    a problem or None; stop_with_term stops the server with SIGTERM (its own handler) instead
    of the protocol's "Q". server_args, for a server that does not print its port (such as
    memcached): its arguments, which name a free port, at every start; client_args: more of
    kvclient's options (-P memcached)."""
    import socket

    ctx = scratch / "kvctx"
    shutil.rmtree(ctx, ignore_errors=True)
    env = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    if not persist:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PMKIT_WPP")}
    stopped = SAVED_EXIT if persist else -signal.SIGPWR
    log = open(scratch / "kvserver.log", "w")
    if server_args is None:
        srv = subprocess.Popen(
            [str(server), "-t", "2"], stdout=subprocess.PIPE, stderr=log, env=env, text=True
        )
        port = int(srv.stdout.readline().split()[-1])
        restart = [str(server), "-t", "2", "-p", str(port)]
    else:
        restart = [str(server), *server_args]
        srv = subprocess.Popen(restart, stdout=log, stderr=log, env=env)
        port = int(server_args[server_args.index("-p") + 1])
        wait_listening(port, srv)
    cli = subprocess.Popen(
        [str(client), str(port), "-t", "4", "-n", str(ops), "-k", "20000", *client_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    restores = 0
    for _ in range(rng.randint(1, 3)):
        if cli.poll() is not None:
            break
        time.sleep(rng.uniform(0.05, 0.5))
        srv.send_signal(signal.SIGPWR)
        srv.wait(timeout=30)
        if srv.returncode != stopped:
            return False, restores, f"server exit {srv.returncode} at a failure"
        restores += 1
        # (a resumed server ignores its arguments; a fresh one needs the port again)
        srv = subprocess.Popen(restart, stdout=log, stderr=log, env=env)
    try:
        out, err = cli.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        for proc in (cli, srv):
            proc.kill()
            proc.wait(timeout=30)
        log.close()
        return False, restores, "the client did not finish within 120 s"
    # The client may end while a restarted server is still restoring, before it listens again:
    # retry while it runs (a server that died instead is reported below by its exit status).
    deadline = time.monotonic() + 10
    problem = None
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                if check and cli.returncode == 0:
                    problem = check(port, srv.pid)
                if not stop_with_term:
                    s.sendall(b"Q\n")
                    s.recv(16)
            break
        except ConnectionRefusedError:
            if srv.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.01)
    if stop_with_term:
        srv.send_signal(signal.SIGTERM)
    try:
        srv.wait(timeout=30)
    except subprocess.TimeoutExpired:
        # a server that does not stop (a must-fail control can leave one spinning) is killed,
        # its supervisor first (the program dies with it), never left running
        srv.kill()
        srv.wait(timeout=30)
        log.close()
        return False, restores, "the server did not stop within 30 s of being told to"
    log.close()
    left = sorted(x.name for x in ctx.iterdir()) if ctx.exists() else []
    if cli.returncode != 0:
        return False, restores, f"client: {out.strip()} {err.strip()}"
    if problem:
        return False, restores, problem
    if srv.returncode != 0 or left:
        return False, restores, f"server exit {srv.returncode}, context {left}"
    return True, restores, out.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kv-trials", type=int, default=20, help="key-value server trials")
    ap.add_argument("--workdir", type=Path, default=Path("/dev/shm/pmkit-wppgolden"))
    a = ap.parse_args()
    names = a.programs.split(",")
    shutil.rmtree(a.workdir, ignore_errors=True)
    s = campaign(names, a.trials, a.seed, a.workdir)
    if a.kv_trials:
        kvdir = a.workdir / "kv"
        kvdir.mkdir(parents=True)
        server, client = build_kv(kvdir)
        rng = random.Random(a.seed)
        res = [kv_trial(server, client, kvdir, rng) for _ in range(a.kv_trials)]
        s["kvserver"] = {
            "trials": len(res),
            "passed": sum(ok for ok, _, _ in res),
            "restores": sum(r for _, r, _ in res),
            "problems": [w for ok, _, w in res if not ok][:5],
        }
        print(f"kvserver: {s['kvserver']['passed']}/{len(res)} trials passed")
    shutil.rmtree(a.workdir, ignore_errors=True)
    bad = {n: v for n, v in s.items() if v["passed"] != v["trials"]}
    for n, v in bad.items():
        print(f"{n}: {v['problems']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
