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

from pmkit import paths

# Modes a user may ask for; None marks one that later work will add (DESIGN.md lists them).
MODES: dict[str, str | None] = {
    "none": "annotations only: no instrumentation",
    "robust": "PMRobust: the compiler inserts the flushes and fences",
    "clobber": None,
    "ssapp": None,
    "wpp": None,
    "arp": None,
}

HELP = """usage: pmkit cc|c++ [--mode=MODE] [ROBUST-OPTIONS] [--trace [--trace-loads]]
                    [--pmkit-dry-run] ARGS...

Compile and link C or C++ with clang-16 and the pmkit pass plugin.

  --mode=MODE       crash-consistency mode: {modes} (default: none)
  --trace           instrument PM accesses for `pmkit explore` and link libpmkit-trace
  --trace-loads     with --trace: record loads as well
  --pmkit-dry-run   print the clang command instead of running it
  CLANG-ARGS        passed to clang unchanged

Robust mode (docs/modes/robust.md):
  --robust-setting=S  base (flush and fence after every PM access; the default)
  --strip-existing    remove the program's own flushes and fences first
  --report            list every flush and fence inserted, with its source line
  --pm-allocators=F   file naming more PM allocators ('<function> return' or
                      '<function> out <argument index>' per line)

Also usable as CC="pmkit cc" in a build system.
"""

# Arguments after which clang does not link.
NO_LINK = {"-c", "-S", "-E", "-M", "-MM", "-fsyntax-only", "--version", "-###"}


class UsageError(Exception):
    """A usage error (exit status 2)."""


def compiler(cxx: bool) -> str:
    name = "clang++-16" if cxx else "clang-16"
    found = shutil.which(name)
    if not found:
        raise paths.EnvError(f"{name} not found: run 'make setup' (Debian package clang-16)")
    return found


def build_command(argv: list[str], cxx: bool) -> tuple[list[str], bool]:
    """The clang command for `pmkit cc ARGV`, and whether it is a dry run."""
    mode, dry, trace, loads, rest = "none", False, False, False, []
    robust: list[str] = []  # -mllvm options of robust mode
    it = iter(argv)
    for a in it:
        if a == "--strip-existing":
            robust.append("-pmkit-robust-strip-existing")
        elif a == "--report":
            robust.append("-pmkit-robust-report")
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
    if mode not in MODES:
        raise UsageError(f"unknown mode '{mode}' (choose from {', '.join(MODES)})")
    if MODES[mode] is None:
        raise UsageError(f"mode '{mode}' is not available in this build yet")
    if robust and mode != "robust":
        raise UsageError(
            "--robust-setting, --strip-existing, --report and --pm-allocators need --mode=robust"
        )
    if loads and not trace:
        raise UsageError("--trace-loads needs --trace")
    if not rest:
        raise UsageError("no input files")
    p = paths.find()
    if trace and not (p.plugin and p.tracelibdir):
        raise paths.EnvError("--trace needs the pass plugin and libpmkit-trace: build with passes")
    cmd = [compiler(cxx)]
    if p.plugin:
        cmd += [f"-fpass-plugin={p.plugin}", f"-fplugin={p.plugin}"]
        cmd += ["-mllvm", f"-pmkit-mode={mode}"]
        for o in robust:
            cmd += ["-mllvm", o]
        if "-pmkit-robust-report" in robust and not any(a.startswith("-g") for a in rest):
            cmd += ["-gline-tables-only"]  # the report's file:line
    if trace:
        # Debug info gives the explorer's reports their file:line.
        cmd += ["-mllvm", "-pmkit-trace"] + (["-mllvm", "-pmkit-trace-loads"] if loads else [])
        if not any(a.startswith("-g") for a in rest):
            cmd += ["-g"]
    cmd += [f"-I{p.include}"]
    cmd += rest
    if not any(a in NO_LINK for a in rest):
        libdir, lib = (p.tracelibdir, "-lpmkit-trace") if trace else (p.libdir, "-lpmkit")
        cmd += [f"-L{libdir}", f"-Wl,-rpath,{libdir}", lib, "-lpthread"]
    return cmd, dry


def run(argv: list[str], cxx: bool) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(HELP.format(modes=", ".join(m for m, d in MODES.items() if d)))
        return 0
    cmd, dry = build_command(argv, cxx)
    if dry:
        print(" ".join(cmd))
        return 0
    sys.stdout.flush()
    os.execv(cmd[0], cmd)
    return 2  # not reached
