# SPDX-License-Identifier: Apache-2.0
"""`pmkit cc` / `pmkit c++`: clang-16 with pmkit added.

Every argument the user gives goes to clang unchanged except pmkit's own, which start with
--mode or --pmkit-. pmkit adds the pass plugin (loaded both as a pass plugin and as a clang
plugin, so that `-mllvm -pmkit-*` options are known when clang parses them), the mode, the include
directory and, when the command links, libpmkit. Usable as CC= / CXX= in a build system.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import textwrap
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from pmkit import deftable, paths


@dataclass(frozen=True)
class ModeOption:
    """A PMK_MODE_OPTION of passes/modes.def: pmkit cc's FLAG passes -mllvm -OPTION."""

    mode: str
    flag: str
    option: str
    kind: str  # CHOICE, SWITCH, NAMES or FILE
    values: list[str]
    help: str


@dataclass(frozen=True)
class ModeTable:
    """passes/modes.def: the modes (name -> help), their pages, those that may run on the
    linked program, and their options."""

    modes: dict[str, str]
    docs: dict[str, str]
    whole_program: list[str]
    options: list[ModeOption]


def modes_def() -> Path:
    """passes/modes.def: the one of the build in use (pmkit-paths.json), else the one of the
    checkout this package sits in."""
    try:
        found = paths.find().modes
    except paths.EnvError:
        found = None
    for f in (found, Path(__file__).resolve().parents[2] / "passes" / "modes.def"):
        if f and f.is_file():
            return f
    raise paths.EnvError("passes/modes.def not found: run 'make build' first")


@functools.cache
def mode_table() -> ModeTable:
    f = modes_def()
    modes, docs, whole = {}, {}, []
    for _ident, name, flags, doc, text in deftable.calls(f, "PMK_MODE", 5):
        modes[name], docs[name] = text, doc
        if "MODE_WHOLE_PROGRAM" in flags:
            whole.append(name)
    opts = [
        ModeOption(m, flag, opt, kind, values.split("|") if values else [], text)
        for m, flag, opt, kind, values, text in deftable.calls(f, "PMK_MODE_OPTION", 6)
    ]
    return ModeTable(modes, docs, whole, opts)


HELP = """usage: pmkit cc|c++ [--mode=MODE] [MODE-OPTIONS] [--trace [--trace-loads]]
                    [--pmkit-dry-run] ARGS...

Compile and link C or C++ with clang-16 and the pmkit pass plugin.

  --mode=MODE       crash-consistency mode: {modes} (default: none)
  --trace           instrument PM accesses for `pmkit explore` and link libpmkit-trace
  --trace-loads     with --trace: record loads as well
  --pmkit-dry-run   print the clang command instead of running it
  --as-launcher CC  run in place of CC, the compiler a build system would run (CMake's
                    compiler and link launchers: the CMake package's pmkit_mode_target)
  CLANG-ARGS        passed to clang unchanged

{mode_options}
Also usable as CC="pmkit cc" in a build system.
"""


def help_text() -> str:
    """`pmkit cc --help`: HELP with the modes that are built."""
    table = mode_table()
    sections = []
    for mode, doc in table.docs.items():
        rows = [(o.flag + ("=" + "|".join(o.values) if o.kind == "CHOICE" else
                           "=F,G" if o.kind == "NAMES" else "=FILE" if o.kind == "FILE" else ""),
                 o.help) for o in table.options if o.mode == mode]  # fmt: skip
        if mode in table.whole_program:
            like = " (as PMRobust does)" if mode == "robust" else ""
            rows.append((
                "--whole-program",
                f"analyse the linked program{like} through clang's LTO: compile steps (-c) emit "
                "bitcode objects (static archives of them work), the link step (lld) runs the "
                "pass on the merged program, which is more precise than one file at a time (give "
                "it to every step)",
            ))  # fmt: skip
        if not rows:
            continue
        lines = [f"{mode} mode ({doc}):"]
        for flag, text in rows:
            body = textwrap.wrap(text, 90 - 24)
            lines.append(f"  {flag:<21} {body[0]}" if len(flag) < 22 else f"  {flag}")
            lines += [" " * 24 + b for b in (body[1:] if len(flag) < 22 else body)]
        sections.append("\n".join(lines))
    return HELP.format(modes=", ".join(table.modes), mode_options="\n\n".join(sections) + "\n")


# Arguments after which clang does not link.
NO_LINK = {"-c", "-S", "-E", "-M", "-MM", "-fsyntax-only", "--version", "-###"}


def option_owner(option: str) -> str | None:
    """The mode whose -mllvm -pmkit-* option this is (by the prefix of modes.def's options:
    -pmkit-robust-..., -pmkit-pmalias-...), or None."""
    for o in mode_table().options:
        if option.startswith("-" + "-".join(o.option.split("-")[:2]) + "-"):
            return o.mode
    return None


class UsageError(Exception):
    """A usage error (exit status 2)."""


def compiler(cxx: bool) -> str:
    name = "clang++-16" if cxx else "clang-16"
    found = shutil.which(name)
    if not found:
        raise paths.EnvError(f"{name} not found: run 'make setup' (Debian package clang-16)")
    return found


SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".C")


def optimization_level(args: list[str]) -> str:
    """The LTO level of a link command: its last -O option (lld's O2 without one)."""
    level = "O2"
    for a in args:
        if a.startswith("-O"):
            v = a[2:]
            level = {"": "O1", "fast": "O3", "g": "O1", "s": "Os", "z": "Oz"}.get(
                v, f"O{min(int(v), 3)}" if v.isdigit() else level
            )
    return level


def encode_options(opts: list[str]) -> str:
    """pmkit options as one list for the pass plugin: OPT;OPT, each %-encoded (pipeline text
    and the list use , ; < > ( ) as separators)."""
    return ";".join(urllib.parse.quote(o, safe="-_=./+:@") for o in opts)


def whole_program_args(
    rest: list[str], options: list[str], plugin: str, compiles: bool, links: bool
) -> list[str]:
    """clang's arguments for a whole-program build through LTO (docs/building.md): a
    compile step emits bitcode with `options` recorded in it (-flto=full); a link step has lld
    run the pmkit-whole-program pass, with `options`, on the merged module."""
    for a in rest:
        if a.startswith(("-flto=thin", "-fno-lto")):
            raise UsageError(f"--whole-program builds with full LTO: drop {a}")
        linker = a.split("=", 1)[1] if a.startswith(("-fuse-ld=", "--ld-path=")) else None
        if (
            linker is not None
            and linker != "lld"
            and not os.path.basename(linker).startswith("ld.lld")
        ):
            raise UsageError(f"--whole-program links with lld (LTO runs the passes): drop {a}")
    args = ["-flto=full"]
    if compiles:
        args += [f"-fpass-plugin={plugin}", f"-fplugin={plugin}"]
        args += ["-mllvm", f"-pmkit-whole-program={encode_options(options)}"]
    if links:
        level = optimization_level(rest)
        pipeline = f"pmkit-whole-program<{level};{encode_options(options)}>"
        args += ["-fuse-ld=lld", "-Xlinker", f"--load-pass-plugin={plugin}"]
        args += ["-Xlinker", f"--lto-newpm-passes={pipeline}"]
    return args


# The symbol a whole-program compile step's object refers to (passes/WholeProgram).
WHOLE_PROGRAM_GUARD = b"__pmkit_link_with_pmkit_cc_whole_program"


def is_whole_program_object(path: str) -> bool:
    """Whether `path` is the bitcode object of a whole-program compile step (not any -flto
    object: only those carry the guard symbol's name)."""
    with open(path, "rb") as f:  # a native object costs 4 bytes
        return f.read(4) == b"BC\xc0\xde" and WHOLE_PROGRAM_GUARD in f.read()


# Options that hold a list (-pmkit-clobber-allow=f,g): given twice, the lists add up.
LIST_OPTIONS = ("-pmkit-clobber-allow", "-pmkit-ssapp-allow")


def merge_list_options(opts: list[str]) -> list[str]:
    """`opts` with each list option once, its names sorted and unique, where the first of them
    was: the compile and link steps then record and compare the same text."""
    out: list[str] = []
    names: dict[str, set[str]] = {}
    for o in opts:
        name, _, value = o.partition("=")
        if name in LIST_OPTIONS:
            if name not in names:
                names[name] = set()
                out.append(name)
            names[name].update(v for v in value.split(",") if v)
        else:
            out.append(o)
    return [f"{o}={','.join(sorted(names[o]))}" if o in names else o for o in out]


def pmkit_mllvm_options(rest: list[str]) -> tuple[list[str], list[str]]:
    """`rest` without its "-mllvm -pmkit-..." pairs, and those options."""
    kept, opts, i = [], [], 0
    while i < len(rest):
        if rest[i] == "-mllvm" and i + 1 < len(rest) and rest[i + 1].startswith("-pmkit-"):
            opts.append(rest[i + 1])
            i += 2
            continue
        kept.append(rest[i])
        i += 1
    return kept, opts


# Options whose value is the next argument (so that argument is not an input file).
VALUE_OPTIONS = {
    "-o", "-I", "-L", "-l", "-D", "-U", "-u", "-T", "-x", "-MF", "-MT", "-MQ", "-include",
    "-isystem", "-iquote", "-idirafter", "-Xlinker", "-Xclang", "-mllvm", "-arch", "-target",
}  # fmt: skip


def c_sources_as_c(args: list[str]) -> list[str]:
    """`args` with each .c input given as `-x c FILE`, and `-x none` after it when more inputs
    follow (clang warns about a `-x none` after the last input)."""
    inputs = [
        i for i, a in enumerate(args)
        if a[:1] != "-" and (i == 0 or args[i - 1] not in VALUE_OPTIONS)
    ]  # fmt: skip
    out: list[str] = []
    for i, a in enumerate(args):
        if i in inputs and a.endswith(".c"):
            out += ["-x", "c", a] + (["-x", "none"] if i != inputs[-1] else [])
        else:
            out.append(a)
    return out


def function_names(arg: str) -> str:
    """The list of an --X-allow=F,G option, checked."""
    flag, names = arg.split("=", 1)
    listed = [n.strip() for n in names.split(",")]
    if not names or not all(listed):
        raise UsageError(f"{flag} needs function names, separated by commas")
    return ",".join(listed)


def build_command(argv: list[str], cxx: bool) -> tuple[list[str], bool]:
    """The clang command for `pmkit cc ARGV`, and whether it is a dry run."""
    table = mode_table()
    whole = False
    mode, dry, trace, loads, rest = "none", False, False, False, []
    given: list[tuple[ModeOption, str]] = []  # modes.def options given, with their -mllvm form
    modes_given: list[str] = []
    by_flag: dict[str, list[ModeOption]] = {}
    for o in table.options:
        by_flag.setdefault(o.flag, []).append(o)
    it = iter(argv)
    for a in it:
        flag, has_value, value = a.partition("=")
        if a == "--whole-program":
            whole = True
        elif flag == "--whole-program" or (
            flag in by_flag and by_flag[flag][0].kind == "SWITCH" and has_value
        ):
            raise UsageError(f"{flag} takes no value")
        elif flag in by_flag and not has_value and by_flag[flag][0].kind != "SWITCH":
            raise UsageError(f"{flag} needs a value: {flag}=...")
        elif flag in by_flag:
            o = by_flag[flag][0]
            earlier = next((v for g, v in given if g.flag == flag), None)
            if o.kind == "SWITCH":
                if earlier is None:
                    given.append((o, ""))
            elif o.kind == "CHOICE":
                if value not in o.values:
                    raise UsageError(
                        f"unknown {flag[2:].replace('-', ' ')} '{value}' "
                        f"(choose from {', '.join(o.values)})"
                    )
                if earlier is not None and earlier != value:
                    raise UsageError(f"{flag} given twice: {earlier} and {value}")
                given.append((o, value))
            elif o.kind == "NAMES":
                given.append((o, function_names(a)))
            else:  # FILE
                if not os.path.isfile(value):
                    what = "a directory, not a file" if os.path.isdir(value) else "no such file"
                    raise UsageError(f"{flag}: {what}: {value}")
                given.append((o, os.path.abspath(value)))
        elif a == "--trace":
            trace = True
        elif a == "--trace-loads":
            loads = True
        elif flag == "--mode":
            m = value if has_value else next(it, "")
            if modes_given and m != modes_given[-1]:
                raise UsageError(f"--mode given twice: {modes_given[-1]} and {m}")
            modes_given.append(m)
            mode = m
        elif a == "--pmkit-dry-run":
            dry = True
        elif a.startswith("--pmkit-"):
            raise UsageError(f"unknown option {a}")
        else:
            rest.append(a)
    if mode == "wpp":
        raise UsageError(
            "whole-process persistence builds with 'pmkit wpp cc' (or CC=\"pmkit wpp cc\"), "
            "not --mode=wpp: see docs/modes/wpp.md"
        )
    if mode not in table.modes:
        raise UsageError(f"unknown mode '{mode}' (choose from {', '.join(table.modes)})")
    mode_options: list[str] = []  # the mode's -mllvm options, a flag all modes share last
    for o, value in sorted(given, key=lambda g: len(by_flag[g[0].flag]) > 1):
        mine = next((x for x in by_flag[o.flag] if x.mode == mode), None)
        if mine is None:
            owners = [x.mode for x in by_flag[o.flag]]
            if len(owners) > 1:
                need = ", ".join(f"--mode={m}" for m in owners[:-1]) + f" or --mode={owners[-1]}"
                raise UsageError(f"{o.flag} needs {need}")
            own = [x.flag for x in table.options if x.mode == o.mode]
            flags = [f for f in dict.fromkeys(own) if len(by_flag[f]) == 1]
            names = flags[0] if len(flags) == 1 else ", ".join(flags[:-1]) + f" and {flags[-1]}"
            raise UsageError(f"{names} need{'s' if len(flags) == 1 else ''} --mode={o.mode}")
        mode_options.append(f"-{mine.option}" + (f"={value}" if value else ""))
    if whole and mode not in table.whole_program:
        need = ", ".join(f"--mode={m}" for m in table.whole_program[:-1])
        raise UsageError(f"--whole-program needs {need} or --mode={table.whole_program[-1]}")
    # A mode's -mllvm option given to another mode would be parsed and do nothing.
    for a, b in zip(rest, rest[1:], strict=False):
        if a == "-mllvm" and b.startswith("-pmkit-mode"):
            raise UsageError(f"give the mode with --mode, not -mllvm {b}")
        owner = option_owner(b) if a == "-mllvm" else None
        if owner and owner != mode:
            raise UsageError(f"{b} is an option of --mode={owner}, not of --mode={mode}")
    if whole and any(
        rest[i : i + 3] == ["-Xclang", "-mllvm", "-Xclang"] and rest[i + 3].startswith("-pmkit-")
        for i in range(len(rest) - 3)
    ):
        raise UsageError(
            "give pmkit options as -mllvm -pmkit-... (not through -Xclang): a whole-program "
            "build records them for the link step"
        )
    if loads and not trace:
        raise UsageError("--trace-loads needs --trace")
    if not rest:
        raise UsageError("no input files")
    p = paths.find()
    if trace and not (p.plugin and p.tracelibdir):
        raise paths.EnvError("--trace needs the pass plugin and libpmkit-trace: build with passes")
    cmd = [compiler(cxx)]
    # A command that only links compiles nothing: no pass runs, and clang would warn that
    # the -mllvm options went unused.
    compiles = any(
        a == "-" or a.startswith("-x") or (a.endswith(SOURCE_SUFFIXES) and a[0] != "-")
        for a in rest
    )
    links = not any(a in NO_LINK for a in rest)
    if links and not whole:
        for a in rest:
            if a.endswith(".o") and os.path.isfile(a) and is_whole_program_object(a):
                raise UsageError(
                    f"{a} was compiled with --whole-program: link with --whole-program too"
                )
    # The passes' options: the mode, its options, tracing.
    options = [f"-pmkit-mode={mode}", *mode_options]
    options += ["-pmkit-trace"] + (["-pmkit-trace-loads"] if loads else []) if trace else []
    if whole:
        if not p.plugin:
            raise paths.EnvError("--whole-program needs the pass plugin: build with passes")
        rest, user = pmkit_mllvm_options(rest)
        options = merge_list_options([*options, *user])
        cmd += whole_program_args(rest, options, p.plugin, compiles, links)
    elif p.plugin and compiles:
        cmd += [f"-fpass-plugin={p.plugin}", f"-fplugin={p.plugin}"]
        for o in options:
            cmd += ["-mllvm", o]
    if compiles and (trace or mode != "none") and not any(a.startswith("-g") for a in rest):
        # file:line in the mode's messages and report; the explorer's reports need -g.
        cmd += ["-g"] if trace else ["-gline-tables-only"]
    cmd += [f"-I{p.include}"]
    if cxx and not any(a.startswith("-x") for a in rest):
        # `pmkit c++` compiles a .c file as C (clang++ would take it for C++, deprecated);
        # `-x c++` asks for C++.
        rest = c_sources_as_c(rest)
    cmd += rest
    if links:
        libdir, lib = (p.tracelibdir, "-lpmkit-trace") if trace else (p.libdir, "-lpmkit")
        cmd += [f"-L{libdir}", f"-Wl,-rpath,{libdir}", lib, "-lpthread"]
    return cmd, dry


def as_launcher(argv: list[str], cxx: bool) -> tuple[list[str], bool]:
    """--as-launcher CC: pmkit runs in place of CC, the compiler (or linker driver) a build
    system would have run, CMake's C_COMPILER_LAUNCHER and RULE_LAUNCH_LINK (what the CMake
    package's pmkit_mode_target sets); a C++ compiler there makes it `pmkit c++`."""
    if "--as-launcher" not in argv:
        return argv, cxx
    i = argv.index("--as-launcher")
    if i + 1 >= len(argv):
        raise UsageError("--as-launcher needs the compiler the build would run after it")
    return argv[:i] + argv[i + 2 :], cxx or "++" in Path(argv[i + 1]).name


def run(argv: list[str], cxx: bool) -> int:
    argv, cxx = as_launcher(argv, cxx)
    if any(a in ("-h", "--help") for a in argv):
        print(help_text())
        return 0
    cmd, dry = build_command(argv, cxx)
    if dry:
        print(" ".join(cmd))
        return 0
    sys.stdout.flush()
    os.execv(cmd[0], cmd)
    return 2  # not reached
