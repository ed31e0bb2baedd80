# SPDX-License-Identifier: Apache-2.0
"""The `pmkit` command: argument parsing for every subcommand and the dispatch table.

Each subcommand has one cmd_<name> handler. Exit status: 0 success, 1 a check failed (a pool or
a crash test found inconsistent), 2 a usage or environment error, always with one clear line on
stderr. `pmkit cc` and `pmkit c++` pass their arguments to clang and are parsed in cc.py.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict

from pmkit import __version__, cc, paths

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors in one line with status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(EXIT_USAGE)


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*([kKmMgGtT]?)(i?[bB])?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 64M, 1G, 4096)")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(m.group(1)) * mult


def parse_addr(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad address '{text}'") from None


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ---- pool ------------------------------------------------------------------------------------


def _with_pool(open_pool, work):
    """Run work(pool) on the pool open_pool() returns; map pool errors to exit statuses.

    Returns (result, None) on success or (None, exit status) after printing the error."""
    from pmkit import libpmkit

    try:
        with open_pool() as p:
            return work(p), None
    except libpmkit.PoolError as e:
        print(f"pmkit: {e.name}: {e}", file=sys.stderr)
        return None, EXIT_FAIL if e.code in libpmkit.VALIDATION_ERRORS else EXIT_USAGE


def cmd_pool_create(args) -> int:
    from pmkit import libpmkit

    i, err = _with_pool(
        lambda: libpmkit.Pool.create(args.path, args.size, args.layout or "", args.base or 0),
        lambda p: p.info(),
    )
    if err is not None:
        return err
    print(f"created {args.path}: {human(i.size)} at {i.base:#x}, uuid {i.uuid}")
    return EXIT_OK


def cmd_pool_info(args) -> int:
    from pmkit import libpmkit

    i, err = _with_pool(lambda: libpmkit.Pool.open(args.path, inspect=True), lambda p: p.info())
    if err is not None:
        return err
    if args.json:
        print(json.dumps(asdict(i), indent=2))
        return EXIT_OK
    rows = [
        ("path", args.path),
        ("uuid", i.uuid),
        ("layout", f'"{i.layout}" (version {i.layout_version})'),
        ("mapped at", f"{i.base:#x} - {i.base + i.size:#x} ({human(i.size)})"),
        ("run generation", str(i.generation)),
        (
            "heap",
            f"{i.nchunks} chunks of {human(i.chunk_size)}: {i.chunks_small} small-block, "
            f"{i.chunks_large} in large blocks, {i.chunks_free} free",
        ),
        ("allocated", f"{i.blocks_used} blocks, {human(i.bytes_used)}"),
        ("root object", f"offset {i.root_off:#x}, {i.root_size} bytes" if i.root_off else "none"),
        ("thread slots", f"{i.nthreads}, {i.threads_busy} with work in flight"),
    ]
    for k, v in rows:
        print(f"{k:>15}: {v}")
    return EXIT_OK


def cmd_pool_check(args) -> int:
    from pmkit import libpmkit

    def check(p):
        p.check()
        return p.info()

    i, err = _with_pool(lambda: libpmkit.Pool.open(args.path, inspect=True), check)
    if err is not None:
        return err
    print(f"{args.path}: consistent ({i.blocks_used} blocks allocated)")
    return EXIT_OK


def cmd_pool_gc(args) -> int:
    from pmkit import libpmkit

    r, err = _with_pool(lambda: libpmkit.Pool.open(args.path), lambda p: p.gc(args.offsets))
    if err is not None:
        return err
    live, freed, nbytes = r
    print(f"{args.path}: {live} blocks reachable, {freed} reclaimed ({human(nbytes)})")
    return EXIT_OK


# ---- demo ------------------------------------------------------------------------------------


def cmd_demo(args) -> int:
    from pmkit import demo

    return demo.run(trials=args.trials, seed=args.seed, ops=args.ops, keep=args.keep)


# ---- explore, sim ----------------------------------------------------------------------------

TOOLS = {"explore": ("explorer", "pmkit-explore"), "sim": ("sim", "pmkit-sim")}


def run_tool(command: str, argv: list[str]) -> int:
    """`pmkit explore` and `pmkit sim`: a C++ program does the work; its options are its own."""
    import os

    attr, name = TOOLS[command]
    exe = getattr(paths.find(), attr)
    if not exe or not exe.exists():
        raise paths.EnvError(f"{name} is not built: run 'make build' first")
    sys.stdout.flush()
    os.execv(str(exe), [str(exe), *argv])
    return EXIT_USAGE  # not reached


# ---- bench ------------------------------------------------------------------------------------

BENCH_HELP = """usage: pmkit bench run [--suite ds|tx|lf|all] [--variants V,...] [--threads 1,2]
                       [--repeat N] [--scale quick|full] [--seconds S] [--only NAME]
                       [--name suite|robust]
       pmkit bench report

run: every workload of bench/suite.json in every variant, interleaved; writes
     bench/results/<name>-<date>-<commit>.json (bench/results/tmp/ with --scale quick).
     Variants: volatile, hand-adr, hand-eadr, pmdk (the default set), robust (robust
     mode; measure it with --name robust --variants hand-adr,robust).
report: regenerate docs/results.md and docs/figures/ from bench/results/*.json.
"""


def run_bench(argv: list[str]) -> int:
    """`pmkit bench`: the harness scripts in the source tree do the work."""
    import os
    from pathlib import Path

    if not argv or argv[0] in ("-h", "--help"):
        print(BENCH_HELP, end="")
        return EXIT_OK if argv else EXIT_USAGE
    scripts = {"run": "suite.py", "report": "report.py"}
    if argv[0] not in scripts:
        print(f"pmkit: error: unknown bench action '{argv[0]}' (run or report)", file=sys.stderr)
        return EXIT_USAGE
    script = Path(__file__).resolve().parents[2] / "bench" / scripts[argv[0]]
    if not script.exists():
        raise paths.EnvError("pmkit bench needs the pmkit source tree (bench/ is not installed)")
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, str(script), *argv[1:]])
    return EXIT_USAGE  # not reached


# ---- the table -------------------------------------------------------------------------------


def build_parser() -> Parser:
    ap = Parser(prog="pmkit", description="Crash consistency for persistent memory.")
    ap.add_argument("--version", action="version", version=f"pmkit {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    for name in ("cc", "c++"):
        sub.add_parser(name, help=f"compile with clang-16 and pmkit ({name} --help for more)")
    sub.add_parser(
        "explore", help="trace a program and check every crash image (explore --help for more)"
    )
    sub.add_parser(
        "sim", help="simulate a trace under persistency models: SCP, RCBSP, ARP (sim --help)"
    )
    sub.add_parser(
        "bench", help="run the workload suite or regenerate docs/results.md (bench --help)"
    )
    sub.add_parser(
        "wpp", help="build, run and power-fail whole-process-persistent programs (wpp --help)"
    )

    pool = sub.add_parser("pool", help="create, inspect, check and collect pools")
    psub = pool.add_subparsers(dest="pool_command", metavar="ACTION", parser_class=Parser)
    pc = psub.add_parser("create", help="create a pool file")
    pc.add_argument("path")
    pc.add_argument("--size", type=parse_size, default=64 << 20, help="bytes (default 64M)")
    pc.add_argument("--layout", help="layout name programs will expect")
    pc.add_argument("--base", type=parse_addr, help="fixed mapping address (default: pick one)")
    pc.set_defaults(func=cmd_pool_create)
    pi = psub.add_parser("info", help="show a pool's header and heap statistics")
    pi.add_argument("path")
    pi.add_argument("--json", action="store_true", help="machine-readable output")
    pi.set_defaults(func=cmd_pool_info)
    pk = psub.add_parser("check", help="validate all metadata (exit 1 if inconsistent)")
    pk.add_argument("path")
    pk.set_defaults(func=cmd_pool_check)
    pg = psub.add_parser("gc", help="reclaim blocks unreachable from the root")
    pg.add_argument("path")
    pg.add_argument(
        "--offsets", action="store_true", help="also treat words holding pool offsets as pointers"
    )
    pg.set_defaults(func=cmd_pool_gc)

    dm = sub.add_parser("demo", help="crash the bundled key-value store and check every recovery")
    dm.add_argument(
        "--trials", type=int, default=100,
        help="random crashes per build after the sweep of the store window: half at random "
        "store points, half SIGKILLs (default 100)",
    )  # fmt: skip
    dm.add_argument("--ops", type=int, default=3000, help="operations per run (default 3000)")
    dm.add_argument("--seed", type=int, default=1, help="seed of the whole demo (default 1)")
    dm.add_argument("--keep", action="store_true", help="keep the pool files")
    dm.set_defaults(func=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in ("cc", "c++"):
            return cc.run(argv[1:], cxx=argv[0] == "c++")
        if argv and argv[0] in TOOLS:
            return run_tool(argv[0], argv[1:])
        if argv and argv[0] == "bench":
            return run_bench(argv[1:])
        if argv and argv[0] == "wpp":
            from pmkit import wpp

            return wpp.run(argv[1:])
        ap = build_parser()
        args = ap.parse_args(argv)
        if not getattr(args, "func", None):
            if args.command == "pool":
                ap.error("pool needs an action: create, info, check or gc")
            ap.print_help()
            return EXIT_USAGE
        return args.func(args)
    except cc.UsageError as e:
        print(f"pmkit: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except paths.EnvError as e:
        print(f"pmkit: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("pmkit: interrupted", file=sys.stderr)
        return 130
