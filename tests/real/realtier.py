# SPDX-License-Identifier: Apache-2.0
"""The real-program tier: code nobody here wrote, from Debian 12's source packages (fetched by
tests/real/debsrc.py, never committed), built with pmkit and checked. `make test-real` runs
every program; `--quick` (part of `make test`) runs fewer trials of each program marked quick.
One progress line per step on stdout. --results writes bench/results/real-<mode>.json (one
file per mode, through pmkit.results like the benchmarks': machine, commit, each program's
result), from which bench/report.py makes the "real programs" section of docs/results.md;
--json FILE writes the raw results. Exit status 1 if any check failed; every verdict line says
what it covered.

    python tests/real/realtier.py [--quick] [--programs evkv] [--results] [--json out.json]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "cli"))
import debsrc  # noqa: E402
import pmlibs  # noqa: E402
import wppgolden  # noqa: E402
from pmkit import results  # noqa: E402
from realcommon import JOBS, Failed, fresh_tree, run, say  # noqa: E402

# ---- libevent, and the libevent server (tests/real/evkv.c) -----------------------------------

LIBEVENT = "2.1.12-stable-8+deb12u1"


def build_libevent(work: Path) -> Path:
    """Debian's libevent as a static musl library for WPP programs, configured as Debian
    configures it (debian/rules: dh_autoreconf, --disable-libevent-regress) plus what a static
    musl build needs (--disable-shared, no OpenSSL, no samples). Compiling passes straight to
    musl-gcc, so the result does not depend on pmkit's runtime and is cached by version.
    Returns the install prefix."""
    tree, version = debsrc.fetch("libevent", LIBEVENT, log=say)
    prefix = debsrc.cache_dir() / "build" / f"libevent_{version}_wpp"
    if (prefix / ".complete").exists():
        say(f"  libevent {version}: built (cached in {prefix})")
        return prefix
    t0 = time.monotonic()
    src, version, log = fresh_tree("libevent", LIBEVENT, work, "libevent-src")
    shutil.rmtree(prefix, ignore_errors=True)
    run(["autoreconf", "-fi"], src, log)
    cc = " ".join(wppgolden.pmkit("wpp", "cc"))
    run(
        [
            "./configure",
            f"CC={cc}",
            f"--prefix={prefix}",
            "--disable-libevent-regress",
            "--disable-shared",
            "--enable-static",
            "--disable-openssl",
            "--disable-samples",
        ],
        src,
        log,
    )
    run(["make", f"-j{JOBS}"], src, log)
    run(["make", "install"], src, log)
    (prefix / ".complete").touch()
    say(f"  libevent {version}: built with `pmkit wpp cc` in {time.monotonic() - t0:.0f} s")
    return prefix


def _ask(port: int, line: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(line.encode() + b"\n")
        return s.makefile().readline().strip()


def alive(port: int, pid: int, clock, seconds: float, least: int) -> str | None:
    """After the load: the server's own timer still runs (clock(port) is a count it advances,
    at least `least` in `seconds`), and the idle server does not spin (a descriptor whose kernel
    object did not come back, left readable forever, keeps an event loop busy: the program
    still answers, and burns every core)."""
    try:
        t0, c0 = clock(port), wppgolden.tree_cpu_seconds(pid)
        time.sleep(seconds)
        t1, c1 = clock(port), wppgolden.tree_cpu_seconds(pid)
    except OSError as e:
        return f"the server does not answer after the load: {e}"
    if t1 - t0 < least:
        return f"the server's timer advanced {t1 - t0} in {seconds} s"
    if (c1 - c0) / seconds > 0.25:
        return f"the idle server used {c1 - c0:.2f} s of CPU in {seconds} s: its loop spins"
    return None


def evkv_alive(port: int, pid: int) -> str | None:
    """evkv's 10 ms timer (through a timerfd): "T" answers its count."""
    return alive(port, pid, lambda p: int(_ask(p, "T").split()[1]), 1.0, 30)


def power_fail(name: str, trial, trials: int) -> tuple[int, int]:
    """trials of wppgolden.kv_trial (1-3 power failures under load each); raises Failed unless
    every one passed with at least one restore in all. Returns (power failures, keys read
    back)."""
    failures = restores = checked = 0
    problems = []
    for i in range(trials):
        ok, r, why = trial()
        restores += r
        if ok:
            checked += json.loads(why)["checked"]
        else:
            failures += 1
            problems.append(why)
        say(f"  {name} trial {i + 1}/{trials}: {'ok' if ok else 'FAILED'}, {r} power failure(s)")
    if failures:
        raise Failed(f"{name}: {failures} of {trials} trials failed: {problems[:3]}")
    if restores < trials:
        raise Failed(f"{name}: only {restores} power failures in {trials} trials")
    return restores, checked


def must_fail(name: str, trial, reasons: str) -> dict:
    """The two controls of a server: restarted without WPP it loses acknowledged writes; with
    eventfds and timerfds coming back as dead descriptors (PMKIT_WPP_BREAK=unknown, the
    behaviour before they were rebuilt) the check must fail for one of `reasons` (|-separated)
    and nothing else."""
    ok, r, without = trial(persist=False)
    if ok or '"lost": 0' in without or r == 0:
        raise Failed(f"{name} without WPP was not caught losing writes: {without}")
    os.environ["PMKIT_WPP_BREAK"] = "unknown"
    try:
        ok, _, broken = trial()
    finally:
        del os.environ["PMKIT_WPP_BREAK"]
    if ok or not any(w in broken for w in reasons.split("|")):
        raise Failed(f"{name} with eventfds not rebuilt was not caught ({reasons}): {broken}")
    return {"control_without_wpp": without, "control_unrebuilt_eventfd": broken}


def evkv(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """A libevent server (tests/real/evkv.c: an eventfd between threads, a timerfd, libevent's
    signal pipe) linked with Debian's libevent, power-failed under load (1-3 failures per
    trial) with kvclient checking every acknowledged set; then the two must-fail controls."""
    prefix = build_libevent(work)
    server, client = work / "evkv", wppgolden.build_kvclient(work)
    log = work / "evkv-build.log"
    log.unlink(missing_ok=True)
    run(
        wppgolden.pmkit("wpp", "cc", "-O2", f"-I{prefix}/include", str(HERE / "evkv.c"))
        + ["-o", str(server), f"{prefix}/lib/libevent_core.a"]
        + [f"{prefix}/lib/libevent_pthreads.a", "-lpthread"],
        work,
        log,
    )

    def trial(**kw):
        return wppgolden.kv_trial(
            server, client, work, rng, check=evkv_alive, stop_with_term=True, **kw
        )

    restores, checked = power_fail("evkv", trial, trials)
    controls = must_fail("evkv", trial, "spins")
    return {
        "libevent": LIBEVENT,
        "trials": trials,
        "power_failures": restores,
        "acknowledged_sets_checked": checked,
        "lost": 0,
        **controls,
        "verdict": (
            f"{trials} trials, {restores} power failures under load, every acknowledged set "
            f"read back ({checked} keys, 0 lost), the timer ticking and the loop idle after "
            f"each; must-fail: without WPP sets were lost, with eventfds not rebuilt the loop "
            f"spun"
        ),
    }


# ---- memcached ------------------------------------------------------------------------------

MEMCACHED = "1.6.18-1+deb12u1"


def build_memcached(work: Path, libevent: Path, wpp: bool) -> Path:
    """Debian's memcached configured as debian/rules configures it (dh_autoreconf, then
    dh_auto_configure with --enable-sasl --enable-tls, which are left out here: Debian ships no
    musl builds of libsasl2 and OpenSSL) against the libevent above; built with `pmkit wpp cc`
    (wpp), or with `musl-gcc -static`, the same program without the runtime (the native
    baseline of the throughput comparison)."""
    kind = "wpp" if wpp else "native"
    src, version, log = fresh_tree("memcached", MEMCACHED, work, f"memcached-{kind}")
    t0 = time.monotonic()
    cc = " ".join(wppgolden.pmkit("wpp", "cc")) if wpp else "musl-gcc -static"
    run(["autoreconf", "-fi"], src, log)
    run(["./configure", f"CC={cc}", f"--with-libevent={libevent}"], src, log)
    run(["make", f"-j{JOBS}", "memcached"], src, log)
    say(f"  memcached {version} ({kind}): built in {time.monotonic() - t0:.0f} s")
    return src / "memcached"


def _mc_time(port: int) -> int:
    """memcached's clock (STAT time), which its one-second timer event advances."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"stats\r\n")
        f = s.makefile("rb")
        for line in f:
            if line.startswith(b"STAT time "):
                return int(line.split()[2])
            if line.startswith(b"END"):
                break
    raise Failed("memcached's stats have no time")


def memcached_args(port: int) -> list[str]:
    user = ["-u", "root"] if os.geteuid() == 0 else []
    return ["-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "4", "-m", "1024", *user]


def throughput(server: Path, client: Path, port: int, env: dict, seconds: float) -> float:
    """kvclient's sets and gets per second (4 connections, half sets) for `seconds`."""
    srv = subprocess.Popen(
        [str(server), *memcached_args(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wppgolden.wait_listening(port, srv)
        out = subprocess.run(
            [str(client), str(port), "-t", "4", "-k", "20000", "-d", str(seconds)]
            + ["-P", "memcached"],
            capture_output=True,
            text=True,
            timeout=seconds + 120,
        )
        if out.returncode != 0:
            raise Failed(f"kvclient against memcached: {out.stdout} {out.stderr}")
        return json.loads(out.stdout)["ops_per_sec"]
    finally:
        srv.terminate()
        srv.wait(timeout=30)


def memcached(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """Debian's memcached with Debian's libevent under WPP, power-failed under load with every
    acknowledged set checked, the two controls, and (not quick) its throughput under WPP
    against the same build without the runtime, interleaved runs."""
    prefix = build_libevent(work)
    server = build_memcached(work, prefix, wpp=True)
    client = wppgolden.build_kvclient(work)
    port = wppgolden.free_port()

    def trial(**kw):
        return wppgolden.kv_trial(
            server,
            client,
            work,
            rng,
            check=lambda p, pid: alive(p, pid, _mc_time, 2.5, 2),
            stop_with_term=True,
            server_args=memcached_args(port),
            client_args=("-P", "memcached", "-T", "10"),
            **kw,
        )

    restores, checked = power_fail("memcached", trial, trials)
    controls = must_fail("memcached", trial, "stuck|spins")
    res = {
        "memcached": MEMCACHED,
        "libevent": LIBEVENT,
        "configure": "Debian's, without --enable-sasl --enable-tls",
        "trials": trials,
        "power_failures": restores,
        "acknowledged_sets_checked": checked,
        "lost": 0,
        **controls,
    }
    verdict = (
        f"{trials} trials, {restores} power failures under load, every acknowledged set read "
        f"back ({checked} keys, 0 lost), its clock advancing and the server idle after each; "
        f"must-fail: without WPP sets were lost, with eventfds not rebuilt it "
        f"{'stalled' if 'stuck' in controls['control_unrebuilt_eventfd'] else 'spun'}"
    )
    if not quick:
        native = build_memcached(work, prefix, wpp=False)
        ctx = work / "tput-ctx"
        env_wpp = dict(os.environ, PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
        runs: dict[str, list[float]] = {"native": [], "wpp": []}
        for _ in range(5):  # interleaved: native, wpp, native, wpp, ...
            runs["native"].append(throughput(native, client, port, dict(os.environ), 3))
            shutil.rmtree(ctx, ignore_errors=True)
            runs["wpp"].append(throughput(server, client, port, env_wpp, 3))
        med = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
        res["throughput_ops_per_sec"] = runs
        res["throughput_ratio_wpp_to_native"] = round(med["wpp"] / med["native"], 3)
        verdict += (
            f"; throughput (medians of 5 interleaved 3 s runs): native {med['native']:.0f}, "
            f"WPP {med['wpp']:.0f} ops/s ({res['throughput_ratio_wpp_to_native']:.2f}x)"
        )
    res["verdict"] = verdict
    return res


# ---- batch programs: byte-identical output after power failures ---------------------------

LUA = "5.4.4-3+deb12u1"
SQLITE = "3.40.1-2+deb12u2"
SCRIPTS = HERE / "scripts"


def build_lua(work: Path) -> Path:
    """Debian's lua5.4 built as debian/rules builds it (its libtool build from
    debian/configure.ac, `make linux-readline`), with `pmkit wpp cc`, static (libtool
    --disable-shared), and without readline (Debian ships no musl readline): `make linux`."""
    src, version, log = fresh_tree("lua5.4", LUA, work, "lua-src")
    t0 = time.monotonic()
    lt = src / "debian" / "libtool"
    lt.mkdir()
    shutil.copy(src / "debian" / "configure.ac", lt)
    cc = " ".join(wppgolden.pmkit("wpp", "cc"))
    run(["autoreconf", "-f", "-i"], lt, log, env=dict(os.environ, LIBTOOLIZE="libtoolize -i"))
    run(["./configure", f"CC={cc}", "--disable-shared"], lt, log)
    (src / "src" / "lua5.4-deb-multiarch.h").write_text(
        "#ifndef _LUA_DEB_MULTIARCH_\n#define _LUA_DEB_MULTIARCH_\n"
        '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"\n#endif\n'
    )
    # one job: the C and C++ libraries race on .libs in a parallel build
    run(["make", "linux", f"LIBTOOL={lt / 'libtool'}", f"CC={cc} -std=gnu99"], src, log)
    say(f"  lua5.4 {version}: built in {time.monotonic() - t0:.0f} s")
    return src / "src" / "lua5.4"


# debian/rules' CFLAGS for sqlite3, as Debian builds it
SQLITE_CFLAGS = (
    "-O2 -fno-strict-aliasing -DSQLITE_SECURE_DELETE -DSQLITE_ENABLE_COLUMN_METADATA "
    "-DSQLITE_ENABLE_FTS3 -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_RTREE=1 "
    "-DSQLITE_SOUNDEX=1 -DSQLITE_ENABLE_UNLOCK_NOTIFY -DSQLITE_OMIT_LOOKASIDE=1 "
    "-DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ALLOW_ROWID_IN_VIEW "
    "-DSQLITE_ENABLE_UPDATE_DELETE_LIMIT=1 -DSQLITE_ENABLE_LOAD_EXTENSION "
    "-DSQLITE_ENABLE_JSON1 -DSQLITE_LIKE_DOESNT_MATCH_BLOBS -DSQLITE_THREADSAFE=1 "
    "-DSQLITE_ENABLE_FTS3_TOKENIZER=1 -DSQLITE_USE_URI=1 -DSQLITE_MAX_SCHEMA_RETRY=25 "
    "-DSQLITE_ENABLE_PREUPDATE_HOOK -DSQLITE_ENABLE_SESSION -DSQLITE_ENABLE_STMTVTAB "
    "-DSQLITE_MAX_VARIABLE_NUMBER=250000"
)


def build_sqlite(work: Path) -> Path:
    """Debian's sqlite3 shell configured as debian/rules configures it (dh_autoreconf, its
    CFLAGS and --enable flags) with `pmkit wpp cc`, static, without the Tcl extension and
    readline (glibc libraries); the build runs tclsh to generate headers."""
    src, version, log = fresh_tree("sqlite3", SQLITE, work, "sqlite-src")
    t0 = time.monotonic()
    cc = " ".join(wppgolden.pmkit("wpp", "cc"))
    run(["autoreconf", "-fi"], src, log)
    flags = ["--enable-threadsafe", "--enable-load-extension", "--enable-json"]
    flags += ["--enable-fts4", "--enable-fts5", "--disable-amalgamation"]
    flags += ["--disable-shared", "--disable-tcl", "--disable-readline"]
    run(["./configure", f"CC={cc}", f"CFLAGS={SQLITE_CFLAGS}", *flags, "SHELL=/bin/sh"], src, log)
    run(["make", "sqlite3.h"], src, log)  # generated first: the parallel build races on it
    run(["make", f"-j{JOBS}", "sqlite3"], src, log)
    say(f"  sqlite3 {version}: built in {time.monotonic() - t0:.0f} s")
    return src / "sqlite3"


def golden(name: str, exe: Path, args: list[str], work: Path, trials: int, rng) -> dict:
    """trials of 1-3 power failures at random moments (tests/cli/wppgolden.py), each requiring
    the output of an uninterrupted run byte for byte, an exit status 0 and an emptied context;
    then the control, the same without WPP (a failure kills it, the rerun starts over), which
    must be caught with different output."""
    wppgolden.PROGRAMS[name] = wppgolden.Program(name, args, timeout=120)
    want, runtime = wppgolden.native(exe, name, work)
    restores, problems = 0, []
    for i in range(trials):
        t = wppgolden.restored_trial(exe, name, want, runtime, work, rng)
        restores += t.restores
        if not (t.ok and t.restores):
            problems.append(t.why or "no restore happened")
        verdict = "ok" if t.ok else "FAILED"
        say(f"  {name} trial {i + 1}/{trials}: {verdict}, {t.restores} restore(s)")
    if problems:
        raise Failed(f"{name}: {len(problems)} of {trials} trials failed: {problems[:3]}")
    control = wppgolden.restored_trial(exe, name, want, runtime, work, rng, persist=False)
    if control.ok or "stdout differs" not in control.why:
        raise Failed(f"{name} without WPP was not caught with different output: {control.why}")
    return {
        "trials": trials,
        "power_failures": restores,
        "output_bytes": len(want),
        "native_seconds": round(runtime, 2),
        "control_without_wpp": control.why[:200],
        "verdict": (
            f"{trials} trials, {restores} power failures, output byte-identical to an "
            f"uninterrupted run ({len(want)} bytes) every time; must-fail: without WPP the "
            f"output differed"
        ),
    }


def lua(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """Debian's lua5.4 running tests/real/scripts/golden.lua under WPP."""
    exe = build_lua(work)
    return {"lua": LUA, **golden("lua5.4", exe, [str(SCRIPTS / "golden.lua")], work, trials, rng)}


def sqlite(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """Debian's sqlite3 shell running tests/real/scripts/golden.sql on an in-memory database
    under WPP."""
    exe = build_sqlite(work)
    args = [":memory:", f".read {SCRIPTS / 'golden.sql'}"]
    return {"sqlite": SQLITE, **golden("sqlite3", exe, args, work, trials, rng)}


# ---- CPython ---------------------------------------------------------------------------------

PYTHON = "3.11.2-6+deb12u8"


def build_python(work: Path) -> tuple[Path, Path]:
    """Debian's python3.11 built as debian/rules builds its static interpreter (autoconf, then
    ../configure in build-static with its common flags, then makesetup over Setup.stdlib) with
    `pmkit wpp cc`, and what a static musl build needs: every extension module built in
    (MODULE_BUILDTYPE=static; a static program cannot load one), pkg-config kept from the
    machine's glibc libraries (PKG_CONFIG_LIBDIR), so zlib, bz2, lzma, OpenSSL, sqlite3,
    libffi and expat's system copy are left out (Debian ships no musl builds; the bundled expat
    and libmpdec are used), no test modules, no dtrace. Returns (WPP build, native build): the
    same objects linked again with `musl-gcc -static`, without the runtime."""
    src, version, log = fresh_tree("python3.11", PYTHON, work, "python-src")
    t0 = time.monotonic()
    run(["autoconf"], src, log)
    b = src / "build-static"
    b.mkdir()
    env = dict(os.environ, MODULE_BUILDTYPE="static", PKG_CONFIG_LIBDIR="/nonexistent")
    cc = " ".join(wppgolden.pmkit("wpp", "cc"))
    flags = ["--enable-ipv6", "--with-computed-gotos", "--without-ensurepip"]
    flags += ["--disable-test-modules", "MKDIR_P=/bin/mkdir -p"]
    run(["../configure", f"CC={cc}", *flags], b, log, env=env)
    # the two example modules Setup.stdlib builds as shared libraries even so
    (b / "Modules" / "Setup.local").write_text("*disabled*\nxxlimited\nxxlimited_35\n")
    setups = ["Modules/Setup.local", "Modules/Setup.bootstrap", "Modules/Setup.stdlib"]
    mk = ["../Modules/makesetup", "-c", "../Modules/config.c.in", "-s", "Modules"]
    run([*mk, *setups, "../Modules/Setup"], b, log)
    shutil.move(b / "config.c", b / "Modules" / "config.c")
    run(["make", "Makefile", "Modules/config.c"], b, log)
    run(["make", f"-j{JOBS}"], b, log)
    wpp = b / "python"
    shutil.move(wpp, b / "python-wpp")
    run(["make", "python", "LINKCC=musl-gcc -static"], b, log)
    shutil.move(wpp, b / "python-native")
    say(f"  python3.11 {version}: built in {time.monotonic() - t0:.0f} s")
    return b / "python-wpp", b / "python-native"


def _py_times(exe: Path, args: list[str], ctx: Path | None) -> dict[str, float]:
    """One run of pybench.py (with a WPP context, or natively): each workload's seconds,
    summed over its rounds, from its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMKIT_WPP")}
    if ctx is not None:
        shutil.rmtree(ctx, ignore_errors=True)
        env.update(PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    t0 = time.monotonic()
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=300)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise Failed(f"pybench.py exited {r.returncode}: {r.stderr[-500:]}")
    times: dict[str, float] = {"total": wall}
    for line in r.stderr.splitlines():
        if line.startswith("time "):
            _, name, sec = line.split()
            times[name] = times.get(name, 0.0) + float(sec)
    return times


def python3(work: Path, trials: int, rng: random.Random, quick: bool) -> dict:
    """Debian's CPython 3.11 running tests/real/scripts/pybench.py (benchmark-style workloads
    in one process) under WPP: golden trials, the control, and (not quick) each workload's
    time under WPP against native, interleaved runs."""
    exe, native = build_python(work)
    args = ["-E", "-B", str(SCRIPTS / "pybench.py")]
    res = {"python": PYTHON, **golden("python3.11", exe, args, work, trials, rng)}
    if quick:
        return res
    runs: dict[str, list[dict]] = {"native": [], "wpp": []}
    for _ in range(5):
        runs["native"].append(_py_times(native, args, None))
        runs["wpp"].append(_py_times(exe, args, work / "ctx-time"))
    med = {
        kind: {k: sorted(r[k] for r in rs)[len(rs) // 2] for k in rs[0]}
        for kind, rs in runs.items()
    }
    ratios = {k: round(med["wpp"][k] / med["native"][k], 3) for k in med["native"]}
    res["seconds_median"] = med
    res["time_ratio_wpp_to_native"] = ratios
    per = sorted(v for k, v in ratios.items() if k != "total")
    res["verdict"] += (
        f"; time (medians of 5 interleaved runs): native {med['native']['total']:.2f} s, "
        f"WPP {med['wpp']['total']:.2f} s ({ratios['total']:.2f}x), per workload "
        f"{per[0]:.2f}x to {per[-1]:.2f}x"
    )
    return res


# ---- the tier ------------------------------------------------------------------------------


@dataclass
class Real:
    name: str
    what: str
    mode: str  # the results file: bench/results/real-<mode>.json
    source: str  # where the code comes from
    glue: str  # what a user does to build it, besides the program's own build
    run: Callable[[Path, int, random.Random, bool], dict]
    trials: int  # in make test-real
    quick_trials: int  # in make test (0: not in the quick subset)


PROGRAMS = {
    "evkv": Real(
        "evkv",
        "libevent server under WPP (Debian's libevent)",
        "wpp",
        f"tests/real/evkv.c (ours) on Debian's libevent {LIBEVENT}",
        "libevent: autoreconf -fi; ./configure CC='pmkit wpp cc' --disable-shared "
        "--disable-openssl; make install. The server: pmkit wpp cc ... libevent_core.a "
        "libevent_pthreads.a",
        evkv,
        trials=10,
        quick_trials=2,
    ),
    "memcached": Real(
        "memcached",
        "Debian's memcached and libevent under WPP",
        "wpp",
        f"Debian's memcached {MEMCACHED}, unmodified",
        "libevent as for evkv; memcached: autoreconf -fi; ./configure CC='pmkit wpp cc' "
        "--with-libevent=PREFIX; make memcached (0 lines of source changed)",
        memcached,
        trials=10,
        quick_trials=0,
    ),
    "lua5.4": Real(
        "lua5.4",
        "Debian's lua5.4 running a script under WPP",
        "wpp",
        f"Debian's lua5.4 {LUA}, unmodified; tests/real/scripts/golden.lua (ours)",
        "Debian's libtool build (autoreconf in debian/libtool, ./configure CC='pmkit wpp cc' "
        "--disable-shared), make linux (no readline) (0 lines of source changed)",
        lua,
        trials=10,
        quick_trials=0,
    ),
    "sqlite3": Real(
        "sqlite3",
        "Debian's sqlite3 shell on an in-memory database under WPP",
        "wpp",
        f"Debian's sqlite3 {SQLITE}, unmodified; tests/real/scripts/golden.sql (ours)",
        "autoreconf -fi; ./configure CC='pmkit wpp cc' with Debian's CFLAGS and flags, "
        "--disable-shared --disable-tcl --disable-readline; make sqlite3 (0 lines changed)",
        sqlite,
        trials=10,
        quick_trials=0,
    ),
    "python3.11": Real(
        "python3.11",
        "Debian's CPython 3.11 running benchmark-style workloads under WPP",
        "wpp",
        f"Debian's python3.11 {PYTHON}, unmodified; tests/real/scripts/pybench.py (ours)",
        "autoconf; MODULE_BUILDTYPE=static PKG_CONFIG_LIBDIR=/nonexistent ../configure "
        "CC='pmkit wpp cc' with Debian's flags that a musl build can take, "
        "--disable-test-modules; makesetup over Setup.stdlib as Debian's static build does "
        "(xxlimited disabled: 2 lines); make (0 lines of source changed)",
        python3,
        trials=10,
        quick_trials=0,
    ),
    "uthash-robust": Real(
        "uthash-robust",
        "a uthash table in a pool, robust mode (base, opt, flit), explored",
        "robust",
        f"Debian's uthash {pmlibs.UTHASH}, unmodified; tests/real/utpm.c (ours) around it",
        "uthash_malloc/uthash_free sent to pmkit_alloc/pmkit_free, a recovery that rebuilds the "
        "buckets from the application-order list; pmkit cc --mode=robust",
        pmlibs.uthash_robust,
        trials=2,
        quick_trials=1,
    ),
    "ck-robust": Real(
        "ck-robust",
        "Concurrency Kit's stack, MPMC ring and hash set in a pool, two threads, robust mode",
        "robust",
        f"Debian's ck {pmlibs.CK}, unmodified; tests/real/ckpm.c (ours) on it",
        "ck's allocator callbacks sent to pmkit_alloc, its function pointers rebound and a "
        "ring reservation dropped at start-up; a 2-line CC script (ck's configure takes CC as "
        "one path); ./configure --cores=2 [--use-cc-builtins]; make",
        pmlibs.ck_robust,
        trials=2,
        quick_trials=0,
    ),
    "ck-ssapp": Real(
        "ck-ssapp",
        "Concurrency Kit's stack and SPSC queue operations as SSAPP FASEs, two threads",
        "ssapp",
        f"Debian's ck {pmlibs.CK}, unmodified; tests/real/ckfase.c (ours) on it",
        "each operation a function marked PMKIT_FASE, pmkit_recover at start-up, "
        "pmkit_ssapp_ptr where code outside FASEs reads a word FASEs update by CAS; "
        "a 2-line CC script; ./configure --cores=2 --use-cc-builtins; make",
        pmlibs.ck_ssapp,
        trials=2,
        quick_trials=0,
    ),
    "uthash-clobber": Real(
        "uthash-clobber",
        "uthash's add, replace and delete as clobber-mode FASEs, crash-tested",
        "clobber",
        f"Debian's uthash {pmlibs.UTHASH}, unmodified; tests/real/utpm.c (ours) around it",
        "uthash_malloc/uthash_free sent to pmkit_alloc/pmkit_free, each operation marked "
        "PMKIT_FASE, pmkit_recover at start-up; pmkit cc --mode=clobber",
        pmlibs.uthash_clobber,
        trials=2,
        quick_trials=1,
    ),
}


def write_results(outcome: dict, programs: dict, rec: results.Recording, seed: int) -> None:
    """bench/results/real-<mode>.json for each mode that ran, in pmkit.results' programs
    layout; rec holds the date, machine (its load average) and commit read before the first
    program ran."""
    for mode in sorted({p.mode for p in programs.values()}):
        doc = replace(rec, benchmark=f"real-{mode}").document(
            "programs",
            f"Programs from Debian's source packages under {mode} mode "
            "(tests/real/realtier.py, make test-real).",
            {"seed": seed},
            programs={
                n: {"source": p.source, "glue": p.glue, **outcome[n]}
                for n, p in programs.items()
                if p.mode == mode
            },
        )
        out = results.write(doc, ROOT / "bench" / "results" / f"real-{mode}.json")
        say(f"wrote {out}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="the subset run by make test")
    ap.add_argument(
        "--programs",
        default=",".join(PROGRAMS),
        help=f"comma-separated, of: {', '.join(PROGRAMS)} (default: all)",
    )
    ap.add_argument("--seed", type=int, default=1, help="seeds the crash points chosen (default 1)")
    ap.add_argument(
        "--workdir",
        type=Path,
        help="each program's work folder goes here, kept when it fails (default: a new folder "
        "/dev/shm/pmkit-real-XXXX for this run; a folder another run is using is refused)",
    )
    ap.add_argument("--json", type=Path, help="write the raw results here")
    ap.add_argument(
        "--results", action="store_true", help="write bench/results/real-<mode>.json (not quick)"
    )
    a = ap.parse_args()
    names = a.programs.split(",")
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown program(s) {unknown}; known: {', '.join(PROGRAMS)}")
    chosen = [PROGRAMS[n] for n in names if not a.quick or PROGRAMS[n].quick_trials]
    if not chosen:  # (a run that checks nothing must not say "0 of 0 passed")
        ap.error(f"--quick runs none of {', '.join(names)}: the quick subset is "
                 f"{', '.join(n for n, p in PROGRAMS.items() if p.quick_trials)}")  # fmt: skip
    # Two runs must not share work folders (make test's quick tier once removed a folder the
    # full tier of another checkout was crashing in): a folder of this run's own, or a given
    # one locked for the run.
    own = a.workdir is None  # a folder of this run's own is removed when every program passed
    if own:
        shm = Path("/dev/shm")
        a.workdir = Path(tempfile.mkdtemp(prefix="pmkit-real-", dir=shm if shm.is_dir() else None))
    a.workdir.mkdir(parents=True, exist_ok=True)
    lock = open(a.workdir / ".lock", "w")  # noqa: SIM115 (held until the process ends)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        ap.error(f"--workdir {a.workdir} is in use by another run of the tier")
    say(f"work folders in {a.workdir}")
    outcome, bad = {}, []
    t_all = time.monotonic()
    rec = results.start("real", ROOT / "build")
    for i, p in enumerate(chosen, 1):
        trials = p.quick_trials if a.quick else p.trials
        say(f"[{i}/{len(chosen)}] {p.name}: {p.what}, {trials} trials")
        work = a.workdir / p.name
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        t0 = time.monotonic()
        try:
            res = p.run(work, trials, random.Random(a.seed), a.quick)
            res["seconds"] = round(time.monotonic() - t0, 1)
            outcome[p.name] = res
            say(f"[{i}/{len(chosen)}] {p.name}: ok in {res['seconds']:.0f} s: {res['verdict']}")
            shutil.rmtree(work, ignore_errors=True)
        except (Failed, debsrc.SourceError) as e:
            bad.append(p.name)
            outcome[p.name] = {"failed": str(e)}
            say(f"[{i}/{len(chosen)}] {p.name}: FAILED: {e} (work kept in {work})")
        except Exception as e:  # a fault of the harness: said as one, and the others still run
            bad.append(p.name)
            where = traceback.extract_tb(e.__traceback__)[-1]
            at = f"{Path(where.filename).name}:{where.lineno}"
            why = f"harness error: {type(e).__name__}: {e} ({at})"
            outcome[p.name] = {"failed": why}
            say(f"[{i}/{len(chosen)}] {p.name}: FAILED: {why} (work kept in {work})")
    if a.json:
        a.json.write_text(json.dumps(outcome, indent=2) + "\n")
    if a.results and not a.quick:
        write_results(outcome, {p.name: p for p in chosen}, rec, a.seed)
    took = time.monotonic() - t_all
    if not bad and own:
        shutil.rmtree(a.workdir, ignore_errors=True)
    say(f"real programs: {len(chosen) - len(bad)} of {len(chosen)} passed in {took:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
