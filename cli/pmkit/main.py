# SPDX-License-Identifier: Apache-2.0
"""The `pmkit` command: argument parsing for every subcommand and the dispatch table.

Each subcommand has one cmd_<name> handler. Exit status: 0 success, 1 a check failed (a pool or
a crash test found inconsistent), 2 a usage or environment error, always with one clear line on
stderr. `pmkit cc` and `pmkit c++` pass their arguments to clang and are parsed in cc.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
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
    n = int(m.group(1)) * mult
    if n >= 1 << 63:  # (a size_t would wrap: 2^64 + 8M made an 8 MiB pool)
        raise argparse.ArgumentTypeError(f"size '{text}' is too large (the limit is 64T)")
    return n


def is_utf8(text: str) -> bool:
    """Whether an argument is UTF-8 text: one in other bytes holds surrogates (PEP 383)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def utf8_text(text: str) -> str:
    if not is_utf8(text):
        raise argparse.ArgumentTypeError(f"'{text}' is not UTF-8 text")
    return text


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


class PathError(Exception):
    """A path the command cannot use (exit status 2); the message names it as given."""


FILE_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _pool_path(path: str) -> None:
    """Refuse a pool that is not a regular file before the library opens it (open() of a FIFO
    would wait for a writer before the library could refuse it)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # the library names the problem as it always has
    if not stat.S_ISREG(mode):
        kind = FILE_KINDS.get(stat.S_IFMT(mode), "")
        raise PathError(f"{path} is not a regular file{f' ({kind})' if kind else ''}")


def _with_pool(open_pool, work, failing=None):
    """Run work(pool) on the pool open_pool() returns; map pool errors to exit statuses: the
    codes in `failing` (default: a pool that fails validation) exit 1, the others 2.

    Returns (result, None) on success or (None, exit status) after printing the error."""
    from pmkit import libpmkit

    if failing is None:
        failing = libpmkit.VALIDATION_ERRORS
    try:
        with open_pool() as p:
            return work(p), None
    except libpmkit.PoolError as e:
        print(f"pmkit: {e.name}: {e}", file=sys.stderr)
        return None, EXIT_FAIL if e.name in failing else EXIT_USAGE


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

    _pool_path(args.path)
    # a file that is no pool at all is the wrong input to info (2), not a failed check
    i, err = _with_pool(
        lambda: libpmkit.Pool.open(args.path, inspect=True),
        lambda p: p.info(),
        libpmkit.VALIDATION_ERRORS - {"PMKIT_E_FOREIGN"},
    )
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

    _pool_path(args.path)
    if args.repair:
        return _pool_repair(args)
    if args.dry_run or args.backup is not None:
        raise PathError("--dry-run and --backup go with --repair")

    def check(p):
        return p.check_report(args.offsets), p.info()

    r, err = _with_pool(lambda: libpmkit.Pool.open(args.path, inspect=True), check)
    if err is not None:
        return err
    rep, i = r
    print(
        f"{args.path}: consistent ({i.blocks_used} blocks allocated; header, state page, "
        f"{i.nthreads} context slots, {i.nchunks} chunks and every block the root and the "
        "contexts reach checked)"
    )
    if rep["run_gaps"]:
        print(
            f"note: {rep['run_gaps']} chunk-table entries inside large blocks read as free: a "
            "crash during a large allocation or free leaves these; the next open completes them"
        )
    if rep["suspects"]:
        src = rep["suspect_from"]
        where = f"the block at offset {src:#x}" if src else "a root"
        _warn_suspects(
            rep["suspects"], f", the first to offset {rep['suspect_off']:#x} from {where}"
        )
    return EXIT_OK


def _pool_repair(args) -> int:
    """check --repair: a dry run first (refusals change nothing), then a backup, then the repair."""
    import shutil
    import subprocess

    from pmkit import libpmkit

    def show(notes: list[str], limit: int = 40) -> None:
        for line in notes[:limit]:
            print(f"  {line}")
        if len(notes) > limit:
            print(f"  ... and {len(notes) - limit} more")

    try:
        st, notes = libpmkit.repair(args.path, dry_run=True)
    except libpmkit.PoolError as e:
        print(f"pmkit: {e.name}: {e}", file=sys.stderr)
        return EXIT_FAIL if e.name in libpmkit.VALIDATION_ERRORS else EXIT_USAGE
    summary = (
        f"{st['blocks_kept']} reachable blocks kept, {st['blocks_restored']} of them marked "
        f"allocated again, {st['blocks_freed']} unreachable freed ({human(st['bytes_freed'])}); "
        f"{st['table_fixed']} table entries, {st['headers_fixed']} chunk headers, "
        f"{st['state_fixed']} state words, {st['contexts_fixed']} context slots rewritten"
        + (f"; {st['bytes_cut']} bytes after the pool's end cut" if st["bytes_cut"] else "")
    )
    if not notes and not any(v for k, v in st.items() if k != "blocks_kept"):
        print(f"{args.path}: nothing to repair ({st['blocks_kept']} reachable blocks)")
        return EXIT_OK
    if args.dry_run:
        print(f"{args.path}: a repair would change:")
        show(notes)
        print(f"dry run, nothing written: {summary}")
        return EXIT_OK
    if args.backup == "":
        raise PathError("--backup needs a file name")
    backup = args.backup or args.path + ".bak"
    if os.path.lexists(backup):
        raise PathError(f"{backup} exists: remove it or name another copy with --backup")
    if not os.access(args.path, os.W_OK):  # before the copy: no backup left behind
        raise PathError(f"cannot repair {args.path}: not writable")
    cp = shutil.which("cp")
    copied = cp and subprocess.run(
        [cp, "--sparse=always", "--reflink=auto", "--", args.path, backup], capture_output=True
    )
    if not copied or copied.returncode != 0:
        err = copied.stderr.decode(errors="replace").strip() if copied else "no cp command"
        print(f"pmkit: error: cannot copy {args.path} to {backup}: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        st, notes = libpmkit.repair(args.path, dry_run=False)
    except libpmkit.PoolError as e:
        print(f"pmkit: {e.name}: {e} (the pool before: {backup})", file=sys.stderr)
        return EXIT_FAIL if e.name in libpmkit.VALIDATION_ERRORS else EXIT_USAGE
    print(f"{args.path}: repaired (the pool before: {backup}):")
    show(notes)
    print(summary)
    return EXIT_OK


def cmd_pool_gc(args) -> int:
    from pmkit import libpmkit

    _pool_path(args.path)
    r, err = _with_pool(lambda: libpmkit.Pool.open(args.path), lambda p: p.gc(args.offsets))
    if err is not None:
        return err
    live, freed, nbytes, suspects = r
    print(f"{args.path}: {live} blocks reachable, {freed} reclaimed ({human(nbytes)})")
    if suspects:
        _warn_suspects(suspects)
    return EXIT_OK


def _warn_suspects(n: int, first: str = "") -> None:
    print(
        f"warning: {n} reachable "
        f"{'word points to a free block' if n == 1 else 'words point to free blocks'}{first}: "
        "a lost allocation bit, or "
        "a pointer the program kept to a block it freed. A lost bit lets the allocator hand "
        "out live data; 'pmkit pool check --repair' marks every reachable block allocated",
        file=sys.stderr,
    )


# ---- demo ------------------------------------------------------------------------------------


def cmd_demo(args) -> int:
    from pmkit import demo

    return demo.run(seed=args.seed, keep=args.keep)


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

BENCH_ACTIONS = {
    "run": ("suite", "run the workload suite, every variant interleaved; write a results file"),
    "report": ("report", "regenerate docs/results.md and docs/figures/ from bench/results/*.json"),
}


def bench_script(name: str):
    """bench/<name>.py of the source tree, imported; None where pmkit runs from an install
    (bench/ is not installed). Its add_arguments and run are `pmkit bench`'s."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / f"{name}.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"pmkit_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (its dataclasses look themselves up there)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def add_bench(sub) -> None:
    bench = sub.add_parser(
        "bench",
        help="run the workload suite or regenerate docs/results.md (in a source checkout)",
        description="The benchmark harness of the source tree (bench/); an installed pmkit "
        "has no bench/, and says so.",
    )
    bsub = bench.add_subparsers(dest="bench_command", metavar="ACTION", parser_class=Parser)
    for action, (script, text) in BENCH_ACTIONS.items():
        mod = bench_script(script)
        p = bsub.add_parser(action, help=text, description=mod.DESCRIPTION if mod else text)
        if mod is None:
            p.set_defaults(func=_bench_not_installed)
            continue
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)


def _bench_not_installed(args) -> int:
    raise paths.EnvError("pmkit bench needs the pmkit source tree (bench/ is not installed)")


# ---- commands parsed elsewhere -----------------------------------------------------------------

# What shell completion offers for an argument (shtab's convention, read by scripts/cli_docs.py;
# spelled out here because the installed command runs without shtab).
COMPLETE_FILE = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}
COMPLETE_DIR = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/", "tcsh": "d"}


def completes(action: argparse.Action, what: dict) -> argparse.Action:
    action.complete = what  # type: ignore[attr-defined]
    return action


_OPTION = re.compile(
    r"^(\s{2,})(-[-\w+]+)(?:[ =]([A-Z][\w=,.\[\]{}:'-]*))?(?:\s*/\s*(--[\w-]+))?"
    r"(?:\s{2,}(\S.*))?$"
)


def help_arguments(p: argparse.ArgumentParser, text: str) -> None:
    """Declare in p the options a command's own --help text lists: `  --opt ARG   what it
    does`, continued on lines indented deeper, in groups headed by an unindented line ending
    in ':'. The tree's entry for a command that is parsed elsewhere (by the C++ explorer and
    simulator, by cc.py around clang's arguments), so that help, man pages and completion come
    from the one text the command prints."""
    paras = text.strip().split("\n\n")
    body = [q for q in paras if not q.startswith("usage:")]
    intro = [q for q in body if not any(_OPTION.match(ln) for ln in q.splitlines())]
    p.description = " ".join(" ".join(q.split()) for q in intro[:1])
    group, seen, last = p, set(), None
    for line in text.splitlines():
        m = _OPTION.match(line)
        if line and not line[0].isspace() and line.rstrip().endswith(":") and not m:
            group = p.add_argument_group(line.rstrip()[:-1])
            last = None
        elif m:
            indent, opt, metavar, alt, what = m.groups()
            names = [n for n in (opt, alt) if n and n not in seen and n not in ("-h", "--help")]
            if not names:
                last = None
                continue
            seen.update(names)
            kw = {"metavar": metavar, "default": argparse.SUPPRESS} if metavar else {}
            action = group.add_argument(
                *names, help=what or "", **(kw or {"action": "store_true", "default": False})
            )
            if metavar in ("FILE", "F", "LIB", "IMAGE"):
                completes(action, COMPLETE_FILE)
            elif metavar == "DIR":
                completes(action, COMPLETE_DIR)
            last = (len(indent), action)
        elif last and line.strip() and len(line) - len(line.lstrip()) > last[0]:
            last[1].help = f"{last[1].help} {line.strip()}".strip()
        else:
            last = None


def add_parsed_elsewhere(sub) -> None:
    """cc, c++, explore and sim in the full tree (man pages, completion): their options as
    their own --help lists them. Dispatch never goes through these entries."""
    import subprocess

    for name in ("cc", "c++"):
        c = sub.add_parser(name, help=f"compile with clang-16 and pmkit (as {name})")
        help_arguments(c, cc.help_text())
        completes(c.add_argument("args", nargs=argparse.REMAINDER, help="clang's arguments"),
                  COMPLETE_FILE)  # fmt: skip
    what = {
        "explore": "trace a program and check every crash image a persistency model " "allows",
        "sim": "simulate a trace under persistency models: SCP, RCBSP, ARP",
    }
    p = paths.find()
    for name, (attr, _) in TOOLS.items():
        t = sub.add_parser(name, help=what[name])
        exe = getattr(p, attr, None)
        if exe and exe.exists():
            r = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
            help_arguments(t, r.stdout or r.stderr)
        completes(t.add_argument("args", nargs=argparse.REMAINDER,
                                 help="-- PROG ARGS..., or a trace"), COMPLETE_FILE)  # fmt: skip


# ---- the table -------------------------------------------------------------------------------


def build_parser(with_bench: bool = True, full: bool = False) -> Parser:
    """The command tree. full: every command with every option, for man pages and completion
    (it runs the explorer's and the simulator's --help); otherwise the commands that main()
    hands to their own parsers are named only."""
    ap = Parser(prog="pmkit", description="Crash consistency for persistent memory.")
    ap.add_argument("--version", action="version", version=f"pmkit {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    if full:
        add_parsed_elsewhere(sub)
    else:
        for name in ("cc", "c++"):
            sub.add_parser(name, help=f"compile with clang-16 and pmkit ({name} --help for more)")
        sub.add_parser(
            "explore", help="trace a program and check every crash image (explore --help)"
        )
        sub.add_parser(
            "sim", help="simulate a trace under persistency models: SCP, RCBSP, ARP (sim --help)"
        )
    if with_bench:
        add_bench(sub)
    else:  # (importing the harness takes a second: only for bench itself, or the full tree)
        sub.add_parser(
            "bench",
            help="run the workload suite or regenerate docs/results.md (in a source checkout)",
        )
    from pmkit import wpp

    w = sub.add_parser(
        "wpp",
        help="build, run and power-fail whole-process-persistent programs",
        description=wpp.DESCRIPTION,
    )
    wpp.add_arguments(w)

    pool = sub.add_parser("pool", help="create, inspect, check and collect pools")
    psub = pool.add_subparsers(dest="pool_command", metavar="ACTION", parser_class=Parser)
    pc = psub.add_parser("create", help="create a pool file")
    completes(pc.add_argument("path"), COMPLETE_FILE)
    pc.add_argument("--size", type=parse_size, default=64 << 20, help="bytes (default 64M)")
    pc.add_argument("--layout", type=utf8_text, help="layout name programs will expect")
    pc.add_argument("--base", type=parse_addr, help="fixed mapping address (default: pick one)")
    pc.set_defaults(func=cmd_pool_create)
    pi = psub.add_parser("info", help="show a pool's header and heap statistics")
    completes(pi.add_argument("path"), COMPLETE_FILE)
    pi.add_argument("--json", action="store_true", help="machine-readable output")
    pi.set_defaults(func=cmd_pool_info)
    pk = psub.add_parser(
        "check",
        help="validate all metadata (exit 1 if inconsistent); --repair rebuilds it",
        description="Validate a pool's metadata and walk what its root reaches. With --repair, "
        "rebuild the allocator metadata from the blocks reachable from a valid root, after "
        "copying the pool to a backup; a repair refuses, changing nothing, when the root "
        "itself cannot be trusted.",
    )
    completes(pk.add_argument("path"), COMPLETE_FILE)
    pk.add_argument("--repair", action="store_true", help="rebuild the allocator metadata")
    pk.add_argument(
        "--dry-run", action="store_true", help="with --repair: show the changes, write nothing"
    )
    pk.add_argument("--backup", metavar="FILE", help="with --repair: the copy (default PATH.bak)")
    pk.add_argument(
        "--offsets",
        action="store_true",
        help="also follow words holding pool offsets (as gc --offsets; repair always does)",
    )
    pk.set_defaults(func=cmd_pool_check)
    pg = psub.add_parser("gc", help="reclaim blocks unreachable from the root")
    completes(pg.add_argument("path"), COMPLETE_FILE)
    pg.add_argument(
        "--offsets", action="store_true", help="also treat words holding pool offsets as pointers"
    )
    pg.set_defaults(func=cmd_pool_gc)

    dm = sub.add_parser(
        "demo",
        help="carry one small program through the modes, each with the explorer's or a power "
        "failure's verdict (in a source checkout)",
    )
    dm.add_argument("--seed", type=int, default=1, help="seed of the power failures (default 1)")
    dm.add_argument("--keep", action="store_true", help="keep the builds, pools and reports")
    dm.set_defaults(func=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # A path given in bytes that are not UTF-8 is printed as those bytes, as the user gave it.
    if hasattr(sys.stderr, "reconfigure"):
        sys.stderr.reconfigure(errors="surrogateescape")
    try:
        if argv and argv[0] in ("cc", "c++"):
            return cc.run(argv[1:], cxx=argv[0] == "c++")
        if argv and argv[0] in TOOLS:
            return run_tool(argv[0], argv[1:])
        if argv and argv[0] == "wpp":
            from pmkit import wpp

            return wpp.run(argv[1:])
        ap = build_parser(with_bench=bool(argv) and argv[0] == "bench")
        args = ap.parse_args(argv)
        if not getattr(args, "func", None):
            if args.command == "pool":
                ap.error("pool needs an action: create, info, check or gc")
            if args.command == "bench":
                ap.error("bench needs an action: run or report")
            ap.print_help()
            return EXIT_USAGE
        return args.func(args)
    except cc.UsageError as e:
        print(f"pmkit: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (paths.EnvError, PathError) as e:
        print(f"pmkit: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except UnicodeEncodeError as e:
        # An argument that is not UTF-8 (held as surrogates) reached code that needs text.
        if not isinstance(e.object, str) or not re.search("[\udc80-\udcff]", e.object):
            raise
        print(f"pmkit: error: '{e.object}' is not UTF-8 text", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("pmkit: interrupted", file=sys.stderr)
        return 130
