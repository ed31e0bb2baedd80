# SPDX-License-Identifier: Apache-2.0
"""`pmkit wpp`: build, run, power-fail and inspect programs under whole-process persistence.

  pmkit wpp cc [musl-gcc arguments]       build a static musl program with the WPP runtime
  pmkit wpp run [--context DIR] [--fresh] -- PROG [ARGS]
                                          run PROG; after a power failure the same command
                                          resumes it where it stopped
  pmkit wpp kill [--context DIR | PROG]   emulate a power failure (SIGPWR) of a running program
  pmkit wpp info [--json] DIR|PROG        the state of a context

The runtime (runtime/wpp) does the work; this module only builds command lines and reads the
fixed prefix of a context's header (runtime/wpp/wpp.h, checked there by a static assertion).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

from pmkit import paths

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
SAVED_EXIT = 86  # WPP_EXIT_SAVED in runtime/wpp/wpp.h, PMKIT_CRASH_EXIT in pmkit.h
CONTEXT_ROOT = Path("/dev/shm/pmkit-wpp")

MAGIC = 0x31305050574B4D50
STATES = {1: "INIT", 2: "RUNNING", 3: "SAVING", 4: "SAVED", 5: "EXITING"}
# magic, version, state, exe_hash, vdso, data_addr, data_len, generation, ns, main_thread,
# created_ns, saved_ns, restore_ns, live_pages, threads_saved, threads_restored
HEADER = struct.Struct("<QIiQQQQIiQQQQQQQ")


class UsageError(Exception):
    pass


def default_context(prog: str) -> Path:
    return CONTEXT_ROOT / Path(prog).name


def _build():
    p = paths.find()
    if not p.wpplib or not p.wpplib.exists() or not p.wppopts:
        raise paths.EnvError("the WPP runtime is not built (needs musl-tools): run 'make build'")
    return p.wpplib, p.wppopts


def _musl_gcc() -> str:
    musl = shutil.which("musl-gcc")
    if not musl:
        raise paths.EnvError("musl-gcc not found: install the Debian package musl-tools")
    return musl


def cc_command(argv: list[str]) -> list[str]:
    """The musl-gcc command line `pmkit wpp cc ARGS` runs."""
    musl = _musl_gcc()
    # pmkit's headers, after the program's own and the system's: a program that also builds in
    # the other modes keeps its PMKIT_FASE annotations (an attribute, nothing to link)
    inc = ["-idirafter", str(paths.find().include)]
    if any(a in ("-c", "-S", "-E", "-M", "-MM") for a in argv):
        return [musl, *argv, *inc]  # no link step: nothing else of ours is needed
    if any(a in ("-shared", "-fPIC", "-pie", "-static-pie") for a in argv):
        raise UsageError("WPP programs are static executables: drop -shared/-pie/-fPIC")
    lib, opts = _build()
    return [musl, *argv, *inc, str(lib), f"@{opts}"]


def cmd_cc(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: pmkit wpp cc [musl-gcc arguments] (e.g. -O2 prog.c -o prog -lm)")
        return EXIT_OK if argv else EXIT_USAGE
    if any(a in ("-print-multiarch", "--print-multiarch") for a in argv):
        # gcc answers for glibc (x86_64-linux-gnu), but what this builds links musl: a
        # configure that checks the compiler's triplet against its headers' (CPython's)
        # must hear musl's, the name Debian's musl is installed under
        out = subprocess.run([_musl_gcc(), *argv], capture_output=True, text=True, check=False)
        sys.stderr.write(out.stderr)
        print(re.sub(r"-gnu$", "-musl", out.stdout.strip()) if out.stdout.strip() else "")
        return out.returncode
    cmd = cc_command(argv)
    sys.stdout.flush()
    os.execv(cmd[0], cmd)
    return EXIT_USAGE  # not reached


def read_header(ctx: Path) -> dict:
    f = ctx / "wpp.ctx"
    try:
        with open(f, "rb") as fh:
            raw = fh.read(HEADER.size)
    except FileNotFoundError:
        raise UsageError(f"{ctx} holds no context (no wpp.ctx)") from None
    if len(raw) < HEADER.size:
        raise UsageError(f"{f} is too short to be a context")
    v = HEADER.unpack(raw)
    if v[0] != MAGIC:
        raise UsageError(f"{f} is not a WPP context")
    return {
        "path": str(ctx),
        "version": v[1],
        "state": STATES.get(v[2], f"corrupt ({v[2]})"),
        "static_data_bytes": v[6],
        "restores": v[7],
        "pid_namespace": bool(v[8]),
        "heap_bytes": v[13] * 4096,
        "threads_saved": v[14],
        "threads_restored": v[15],
        "last_restore_ms": v[12] / 1e6,
        "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v[10] / 1e9)),
    }


def _context_of(target: str | None, ctx: str | None) -> Path:
    if ctx:
        return Path(ctx)
    if not target:
        raise UsageError("name the program or give --context DIR")
    p = Path(target)
    # a path names the folder itself (a message about it names it), a bare word a program
    if "/" in target or (p / "wpp.ctx").exists() or (p / "pid").exists():
        return p
    return default_context(target)


def _launch(argv: list[str]) -> int:
    """`pmkit wpp run` and `kill` are the front end's (cli/launch.c), their one implementation:
    they sit on a program's restart path, where Python's start-up would cost more than the
    restart itself."""
    exe = paths.find().binary("pmkit-launch")
    sys.stdout.flush()
    os.execv(exe, [str(exe), "wpp", *argv])
    return EXIT_USAGE  # not reached


def _in_use(ctx: Path) -> bool:
    """Whether a program runs in the context: it holds a lock on the directory for its whole
    run (runtime/wpp/wpp.c, lock_context_dir)."""
    import fcntl

    try:
        fd = os.open(ctx, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def cmd_info(args) -> int:
    ctx = _context_of(args.target, None)
    h = read_header(ctx)
    h["running"] = _in_use(ctx)
    state = h["state"]
    if state != "SAVED" and not h["running"]:
        # a program killed without a save (SIGKILL, a crash) leaves its last state behind
        state += " but no program runs in it: it ended without a save and cannot be resumed"
        state += " (start afresh: pmkit wpp run --fresh)"
    if args.json:
        print(json.dumps(h, indent=2))
        return EXIT_OK
    print(f"{h['path']}: {state}, {h['restores']} restore(s), layout {h['version']}")
    print(f"  heap in use {h['heap_bytes'] >> 10} KiB, static data {h['static_data_bytes']} B")
    print(f"  threads saved {h['threads_saved']}, restored {h['threads_restored']}")
    print(f"  last restore {h['last_restore_ms']:.2f} ms; pid namespace: {h['pid_namespace']}")
    return EXIT_OK


DESCRIPTION = (
    "Whole-process persistence: a static musl program whose whole state outlives a power "
    "failure; the same command again resumes it where it stopped."
)


def _parser() -> argparse.ArgumentParser:
    from pmkit.main import Parser

    ap = Parser(prog="pmkit wpp", description=DESCRIPTION)
    add_arguments(ap)
    return ap


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """pmkit wpp's actions, in its own parser and in pmkit's command tree."""
    from pmkit.main import Parser

    sub = ap.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    c = sub.add_parser("cc", help="build a program (musl-gcc arguments)")
    c.add_argument("args", nargs=argparse.REMAINDER, help="musl-gcc's arguments")
    r = sub.add_parser("run", help="run or resume a program")
    r.add_argument("--context", help=f"context directory (default {CONTEXT_ROOT}/<program>)")
    r.add_argument("--fresh", action="store_true", help="discard a saved context first")
    r.add_argument("prog", nargs=argparse.REMAINDER, help="-- PROG [ARGS]")
    k = sub.add_parser("kill", help="emulate a power failure of a running program")
    k.add_argument("target", nargs="?", help="program name or context directory")
    k.add_argument("--context", help="context directory")
    k.add_argument("--wait", type=float, default=5.0, help="seconds to wait for the save")
    i = sub.add_parser("info", help="show a context's state")
    i.add_argument("target", help="program name or context directory")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.set_defaults(func=cmd_info)


def run(argv: list[str]) -> int:
    try:
        if argv and argv[0] == "cc":
            return cmd_cc(argv[1:])
        opts = argv[: argv.index("--")] if "--" in argv else argv
        if argv and argv[0] in ("run", "kill") and not {"-h", "--help"} & set(opts):
            return _launch(argv)
        ap = _parser()
        if argv and argv[0] == "run" and "--" in argv:
            i = argv.index("--")
            args = ap.parse_args(argv[:i])
            args.prog = argv[i + 1 :]
        else:
            args = ap.parse_args(argv)
            if getattr(args, "prog", None) and args.prog[0] == "--":
                args.prog = args.prog[1:]
        if not getattr(args, "func", None):
            ap.error("wpp needs an action: cc, run, kill or info")
        return args.func(args)
    except UsageError as e:
        print(f"pmkit wpp: error: {e}", file=sys.stderr)
        return EXIT_USAGE
