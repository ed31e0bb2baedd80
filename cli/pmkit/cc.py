# SPDX-License-Identifier: Apache-2.0
"""`pmkit cc` / `pmkit c++`: clang-16 with pmkit added.

Every argument the user gives goes to clang unchanged except pmkit's own, which start with
--mode or --pmkit-. pmkit adds the pass plugin (loaded both as a pass plugin and as a clang
plugin, so that `-mllvm -pmkit-*` options are known when clang parses them), the mode, the include
directory and, when the command links, libpmkit. Usable as CC= / CXX= in a build system.
"""

from __future__ import annotations

import os
import shutil
import sys
import urllib.parse
from pathlib import Path

from pmkit import paths

# Modes a user may ask for; None marks one that later work will add (DESIGN.md lists them).
MODES: dict[str, str | None] = {
    "none": "annotations only: no instrumentation",
    "robust": "PMRobust: the compiler inserts the flushes and fences",
    "clobber": "Clobber-NVM: failure-atomic functions (PMKIT_FASE) by clobber logging",
    "ssapp": "SSAPP: failure-atomic and lock-free functions (PMKIT_FASE) on eADR, resumed "
    "after a crash",
    "wpp": None,
    "arp": "acquire-release persistency: pmkit::atomic and sequence points lowered to "
    "clwb/sfence",
}

HELP = """usage: pmkit cc|c++ [--mode=MODE] [ROBUST-OPTIONS] [--trace [--trace-loads]]
                    [--pmkit-dry-run] ARGS...

Compile and link C or C++ with clang-16 and the pmkit pass plugin.

  --mode=MODE       crash-consistency mode: {modes} (default: none)
  --trace           instrument PM accesses for `pmkit explore` and link libpmkit-trace
  --trace-loads     with --trace: record loads as well
  --pmkit-dry-run   print the clang command instead of running it
  --as-launcher CC  run in place of CC, the compiler a build system would run (CMake's
                    compiler and link launchers: the CMake package's pmkit_mode_target)
  CLANG-ARGS        passed to clang unchanged

Robust mode (docs/modes/robust.md):
  --robust-setting=S  base (flush and fence after every PM access; the default),
                      opt (escape and persistency-state analysis: fences only where
                      robustness needs them), flit (opt, with FliT counters for atomics)
  --strip-existing    remove the program's own flushes and fences first
  --report            list every flush and fence inserted, with its source line
  --pm-allocators=F   file naming more PM allocators ('<function> return' or
                      '<function> out <argument index>' per line)
  --whole-program     analyse the linked program, as PMRobust does, through clang's LTO:
                      compile steps (-c) emit bitcode objects (static archives of them
                      work), the link step (lld) runs the pass on the merged program
                      (more precise than one file at a time; give it to every step)

Clobber mode (docs/modes/clobber.md):
  --clobber-setting=S  clobber (log only clobber writes, recovery re-executes; the default)
                       or undo (log every PM write, recovery rolls back: the baseline)
  --clobber-domain=D   adr (write back every PM write; the default) or eadr (no write-backs)
  --clobber-allow=F,G  external functions a FASE may call (they write no PM)
  --report             list each FASE's writes and whether (and why) each is logged
  --whole-program      as for robust mode: the analysis sees across source files

SSAPP mode (docs/modes/ssapp.md):
  --ssapp-fence=F      sfence (end every RISE with an sfence; the default) or compiler (a
                       compiler barrier: enough on x86 under eADR)
  --ssapp-allow=F,G    external functions a FASE may call (calling them again is harmless)
  --ssapp-rmw-ints     integers that FASEs update with atomic RMWs stay below 2^48 (their
                       top 16 bits hold the tag that makes each RMW detectable)
  --report             list each FASE's RISEs: kind, source line, torn-bit slots
  --whole-program      as for robust mode

ARP mode (docs/modes/arp.md):
  --arp-lowering=L     arp (sfence at persistent releases and sequence points; the
                       default), scp (clwb + sfence after every PM write) or epoch
                       (mfence at every sync access and sequence point)

Also usable as CC="pmkit cc" in a build system.
"""


def help_text() -> str:
    """`pmkit cc --help`: HELP with the modes that are built."""
    return HELP.format(modes=", ".join(m for m, d in MODES.items() if d))


# Arguments after which clang does not link.
NO_LINK = {"-c", "-S", "-E", "-M", "-MM", "-fsyntax-only", "--version", "-###"}


# Which mode a -mllvm -pmkit-* option belongs to, by prefix.
OPTION_MODES = (
    ("-pmkit-robust-", "robust"), ("-pmkit-pmalias-", "robust"), ("-pmkit-clobber-", "clobber"),
    ("-pmkit-ssapp-", "ssapp"), ("-pmkit-arp-", "arp"),
)  # fmt: skip


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
    if not names or any(not n.strip() for n in names.split(",")):
        raise UsageError(f"{flag} needs function names, separated by commas")
    return names


def build_command(argv: list[str], cxx: bool) -> tuple[list[str], bool]:
    """The clang command for `pmkit cc ARGV`, and whether it is a dry run."""
    whole = False
    mode, dry, trace, loads, rest = "none", False, False, False, []
    robust: list[str] = []  # -mllvm options of robust mode
    clobber: list[str] = []  # -mllvm options of clobber mode
    ssapp: list[str] = []  # -mllvm options of ssapp mode
    arp: list[str] = []  # -mllvm options of arp mode
    report = False
    it = iter(argv)
    for a in it:
        if a == "--whole-program":
            whole = True
        elif a == "--strip-existing":
            robust.append("-pmkit-robust-strip-existing")
        elif a == "--report":
            report = True
        elif a.startswith("--clobber-setting="):
            setting = a.split("=", 1)[1]
            if setting not in ("clobber", "undo"):
                raise UsageError(f"unknown clobber setting '{setting}' (choose from clobber, undo)")
            clobber.append(f"-pmkit-clobber-setting={setting}")
        elif a.startswith("--clobber-domain="):
            domain = a.split("=", 1)[1]
            if domain not in ("adr", "eadr"):
                raise UsageError(f"unknown clobber domain '{domain}' (choose from adr, eadr)")
            clobber.append(f"-pmkit-clobber-domain={domain}")
        elif a.startswith("--clobber-allow="):
            clobber.append(f"-pmkit-clobber-allow={function_names(a)}")
        elif a.startswith("--ssapp-fence="):
            fence = a.split("=", 1)[1]
            if fence not in ("sfence", "compiler"):
                raise UsageError(f"unknown ssapp fence '{fence}' (choose from sfence, compiler)")
            ssapp.append(f"-pmkit-ssapp-fence={fence}")
        elif a.startswith("--arp-lowering="):
            lowering = a.split("=", 1)[1]
            if lowering not in ("arp", "scp", "epoch"):
                raise UsageError(f"unknown arp lowering '{lowering}' (choose from arp, scp, epoch)")
            arp.append(f"-pmkit-arp-lowering={lowering}")
        elif a == "--ssapp-rmw-ints":
            ssapp.append("-pmkit-ssapp-rmw-ints")
        elif a.startswith("--ssapp-allow="):
            ssapp.append(f"-pmkit-ssapp-allow={function_names(a)}")
        elif a.startswith("--robust-setting="):
            setting = a.split("=", 1)[1]
            if setting not in ("base", "opt", "flit"):
                raise UsageError(
                    f"unknown robust setting '{setting}' (choose from base, opt, flit)"
                )
            robust.append(f"-pmkit-robust-setting={setting}")
        elif a.startswith("--pm-allocators="):
            f = a.split("=", 1)[1]
            if not os.path.isfile(f):
                raise UsageError(f"--pm-allocators: no such file: {f}")
            robust.append(f"-pmkit-pmalias-config={os.path.abspath(f)}")
        elif a == "--trace":
            trace = True
        elif a == "--trace-loads":
            loads = True
        elif a == "--mode":
            mode = next(it, "")
        elif a.startswith("--mode="):
            mode = a.split("=", 1)[1]
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
    if mode not in MODES:
        raise UsageError(f"unknown mode '{mode}' (choose from {', '.join(MODES)})")
    if MODES[mode] is None:
        raise UsageError(f"mode '{mode}' is not available in this build yet")
    if robust and mode != "robust":
        raise UsageError(
            "--robust-setting, --strip-existing and --pm-allocators need --mode=robust"
        )
    if clobber and mode != "clobber":
        raise UsageError(
            "--clobber-setting, --clobber-domain and --clobber-allow need --mode=clobber"
        )
    if ssapp and mode != "ssapp":
        raise UsageError("--ssapp-fence, --ssapp-allow and --ssapp-rmw-ints need --mode=ssapp")
    if arp and mode != "arp":
        raise UsageError("--arp-lowering needs --mode=arp")
    if report and mode not in ("robust", "clobber", "ssapp"):
        raise UsageError("--report needs --mode=robust, --mode=clobber or --mode=ssapp")
    if whole and mode not in ("robust", "clobber", "ssapp"):
        raise UsageError("--whole-program needs --mode=robust, --mode=clobber or --mode=ssapp")
    if report:
        robust.append(f"-pmkit-{mode}-report")
    robust += clobber + ssapp + arp  # the mode's -mllvm options
    # A mode's -mllvm option given to another mode would be parsed and do nothing.
    for a, b in zip(rest, rest[1:], strict=False):
        owner = next((m for pre, m in OPTION_MODES if b.startswith(pre)), None)
        if a == "-mllvm" and owner and owner != mode:
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
    options = [f"-pmkit-mode={mode}", *robust]
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
