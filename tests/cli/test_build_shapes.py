# SPDX-License-Identifier: Apache-2.0
"""A multi-file project with a static library (tests/cli/ledger) built as users build:
make and CMake with CC="pmkit cc --mode=M --whole-program", in robust, clobber and ssapp mode,
then explored crash by crash. The link step runs the mode's pass on the whole program (LTO),
and every build explores clean; two builds must fail: one with no pmkit mode, and a clobber
build told (in CFLAGS only, as -mllvm) to log nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LEDGER = Path(__file__).parent / "ledger"
PMKIT = str(Path(sys.executable).parent / "pmkit")


def build_with(system: str, src: Path, cc: str, flags: str, name: str) -> tuple[bool, str, Path]:
    """Build the project in `src` (its Makefile or CMakeLists.txt, program `name`) with make
    or cmake, CC=`cc` and CFLAGS=`flags`, as a user would: whether it built, the output of
    every command, the program's path."""
    if system == "make":
        cmds = [["make", "-C", str(src), f"CC={cc}", "AR=llvm-ar-16", f"CFLAGS={flags}"]]
        exe = src / name
    else:
        b = src / "build"
        cmds = [
            ["cmake", "-S", str(src), "-B", str(b), "-G", "Ninja",
             "-DCMAKE_AR=/usr/bin/llvm-ar-16", f"-DCMAKE_C_FLAGS={flags}"],
            ["cmake", "--build", str(b)],
        ]  # fmt: skip
        exe = b / name
    env = dict(os.environ, CC=cc)
    out = ""
    for c in cmds:
        r = subprocess.run(c, capture_output=True, text=True, env=env)
        out += r.stdout + r.stderr
        if r.returncode:
            return False, out, exe
    return True, out, exe


def build(system: str, tmp: Path, cc: str, cflags: str = "") -> tuple[Path, str]:
    """Build the ledger with `system` (make or cmake); its binary and the build's output."""
    src = tmp / "src"
    shutil.copytree(LEDGER, src)
    ok, out, exe = build_with(system, src, cc, f"-O2 {cflags}".strip(), "ledger")
    assert ok, out
    return exe, out


def explore(
    run, tmp: Path, exe: Path, model: str, atomic: bool, budget: int = 300, *extra: str
) -> dict:
    """The JSON verdict of exploring `ledger run POOL 5` against `ledger check`."""
    check = f"{exe} check {{pool}}" + (" --atomic" if atomic else "")
    prog = [str(exe), "run", "{pool}", "5"]
    return explore_json(run, tmp, check, prog, model, budget, *extra)


def explore_json(
    run, tmp: Path, check: str, prog: list[str], model: str, budget: int, *extra: str
) -> dict:
    """The JSON verdict of `pmkit explore` on `prog` ("{pool}" in it: a new pool's path)."""
    verdict = tmp / "verdict.json"
    prog = [a.replace("{pool}", str(tmp / "explored.pool")) for a in prog]
    r = run(
        "explore", "--no-progress", "--model", model, "--budget", str(budget),
        "--max-reports", "100", "--json", str(verdict), "--save-dir", str(tmp / "failures"),
        "--check", check, *extra, "--", *prog,
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return json.loads(verdict.read_text())


def lost_lines(verdict: dict) -> set[str]:
    """file:line (file name only) of the writes in each failure's minimal lost set."""
    return {
        os.path.basename(w["loc"].split()[0].rsplit(":", 1)[0])
        for f in verdict["failures"]
        for w in f["lost"]
    }


MODES = {
    # mode: (explorer model, checker wants an exact sum, a report line only the pass writes)
    "robust": ("x86", False, "ledger.c:8: store to PM (pmkit_zalloc at alloc.c:10)"),
    "clobber": ("x86", True, "ledger.c:10: store: logged: clobbers an input read"),
    "ssapp": ("eadr", True, "pmkit-ssapp: FASE ledger_put: 5 RISEs"),
}


@pytest.mark.parametrize("system", ["make", "cmake"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_project_builds_whole_program_and_explores_clean(run, tmp_path, mode, system):
    model, atomic, report = MODES[mode]
    cc = f"{PMKIT} cc --mode={mode} --whole-program --trace --report"
    exe, out = build(system, tmp_path, cc)
    # The pass ran once, on the linked program: in robust mode it followed the PM block
    # through the allocator wrapper of another file of the library.
    assert re.sub(r"[\w./-]*/(\w+\.c)", r"\1", out).count(report) == 1, out
    # eADR: a crash point at every store, 471 of them. Robust mode is also held to the
    # dynamic oracle: no image that strict persistency cannot produce.
    oracle = ["--robustness"] if mode == "robust" else []
    v = explore(run, tmp_path, exe, model, atomic, 1200 if model == "eadr" else 300, *oracle)
    if oracle:
        assert v["robustness"]["violating"] == 0, v["robustness"]
    # Every crash point explored; the pool's creation has too many images to enumerate, but
    # for ssapp under eadr, whose images are then few enough (the zeroing of fresh blocks makes
    # none: docs/explorer.md), exhaustively.
    want = "ok" if mode == "ssapp" else "sampled"
    assert (v["result"], v["images_failed"]) == (want, 0), v
    cov = v["coverage"]
    assert cov["points_explored"] == cov["points_total"] > 10, cov
    assert v["images_checked"] > 100, v


def test_project_must_fail_without_a_mode(run, tmp_path):
    """No mode: nothing is written back, and the explorer finds the entries that a crash
    loses while the count that publishes them survives."""
    exe, _ = build("make", tmp_path, f"{PMKIT} cc --trace")
    v = explore(run, tmp_path, exe, "x86", False)
    assert v["result"] == "failed", v
    assert lost_lines(v) == {"ledger.c:8", "ledger.c:9"}, v["failure_groups"]


def test_project_must_fail_when_clobber_logs_nothing(run, tmp_path):
    """-mllvm -pmkit-clobber-skip-log given in CFLAGS reaches the link step's pass: recovery
    re-executes a put whose stores had all persisted, and the check fails."""
    cc = f"{PMKIT} cc --mode=clobber --whole-program --trace"
    exe, _ = build("cmake", tmp_path, cc, "-mllvm -pmkit-clobber-skip-log")
    v = explore(run, tmp_path, exe, "x86", True)
    assert v["result"] == "failed", v
    # Each failure persisted every write (nothing to minimise): the re-execution broke it,
    # not a lost write. The same build without the option explores clean (above).
    assert v["failures"] and lost_lines(v) == set(), v["failures"]


# --- every option in every build shape --------------------------------------------------

OPTIONS = Path(__file__).parent / "options"

# The builds of the options program; "{allocators}" is its allocator file. Several options
# share a build when their effects are independent.
BUILDS = {
    "robust": ["--mode=robust", "--report"],
    "robust-opts": [
        "--mode=robust", "--report", "--robust-setting=opt", "--strip-existing", "-mllvm",
        "-pmkit-robust-no-split", "--trace", "--trace-loads",
    ],
    # The base setting's report names each PM store's source.
    "robust-alloc": ["--mode=robust", "--report", "--pm-allocators={allocators}"],
    "robust-flit": ["--mode=robust", "--robust-setting=flit", "--trace"],
    "clobber": ["--mode=clobber", "--report", "--clobber-allow=getpid"],
    "clobber-opts": [
        "--mode=clobber", "--report", "--clobber-allow=getpid", "--clobber-setting=undo",
        "--clobber-domain=eadr", "-mllvm", "-pmkit-clobber-crash-points", "-mllvm",
        "-pmkit-clobber-skip-log",
    ],
    "clobber-quiet": ["--mode=clobber", "--clobber-allow=getpid"],
    "clobber-no-allow": ["--mode=clobber", "--report"],
    "ssapp": ["--mode=ssapp", "--report", "--ssapp-allow=getpid", "--ssapp-rmw-ints"],
    "ssapp-opts": [
        "--mode=ssapp", "--ssapp-allow=getpid", "--ssapp-rmw-ints", "--ssapp-fence=compiler",
        "-mllvm", "-pmkit-ssapp-crash-points=store",
    ],
    "ssapp-no-allow": ["--mode=ssapp", "--ssapp-rmw-ints"],
    "ssapp-no-rmw": ["--mode=ssapp", "--ssapp-allow=getpid"],
}  # fmt: skip

NO_WB, POINT, LOG = "__pmkit_clobber_wb", "__pmkit_crash_point", "__pmkit_clobber_log"
# option: (the build with it, the build without it, what only the first shows). A build
# that must fail without the option must fail for the reason named in REFUSALS.
EFFECTS = {
    "--robust-setting=opt": ("robust-opts", "robust", lambda b: "write-back after: store" in b.out),
    "--robust-setting=flit": ("robust-flit", "robust", lambda b: "__pmkit_flit_counters" in b.syms),
    "--strip-existing": ("robust-opts", "robust", lambda b: "pmkit_persist" not in b.syms),
    "--pm-allocators": ("robust-alloc", "robust", lambda b: "(dram_alloc at " in b.out),
    "-pmkit-robust-no-split": ("robust-opts", "robust", lambda b: "split the" not in b.out),
    "--report (robust)": ("robust", "robust-flit", lambda b: "pmkit-robust: " in b.out),
    "--trace": ("robust-flit", "robust", lambda b: "__pmkit_trace_store" in b.syms),
    "--trace-loads": ("robust-opts", "robust-flit", lambda b: "__pmkit_trace_load" in b.syms),
    "--clobber-allow": ("clobber", "clobber-no-allow", lambda b: b.ok),
    "--clobber-setting=undo": ("clobber-opts", "clobber", lambda b: "undo setting" in b.out),
    "--clobber-domain=eadr": ("clobber-opts", "clobber", lambda b: NO_WB not in b.syms),
    "-pmkit-clobber-crash-points": ("clobber-opts", "clobber", lambda b: POINT in b.syms),
    "-pmkit-clobber-skip-log": ("clobber-opts", "clobber", lambda b: LOG not in b.syms),
    "--report (clobber)": ("clobber", "clobber-quiet", lambda b: "pmkit-clobber: bump" in b.out),
    "--ssapp-allow": ("ssapp", "ssapp-no-allow", lambda b: b.ok),
    "--ssapp-rmw-ints": ("ssapp", "ssapp-no-rmw", lambda b: b.ok),
    "--ssapp-fence=compiler": ("ssapp-opts", "ssapp", lambda b: b.ok and b.sfences == 0),
    "-pmkit-ssapp-crash-points": ("ssapp-opts", "ssapp", lambda b: POINT in b.syms),
    "--report (ssapp)": ("ssapp", "ssapp-opts", lambda b: "pmkit-ssapp: FASE bump" in b.out),
}  # fmt: skip
REFUSALS = {
    "clobber-no-allow": "FASE bump calls external function 'getpid'",
    "ssapp-no-allow": "FASE bump calls getpid",
    "ssapp-no-rmw": "(pmkit cc --ssapp-rmw-ints)",
}
# pmkit cc options with no effect to see here: defaults (base, clobber, adr, sfence are the
# builds without an option), the shape itself, and arp mode (one file at a time only; its
# lowerings are tested in test_arp.py).
NOT_HERE = {
    "--whole-program",
    "--pmkit-dry-run",
    "--mode",
    "--arp-lowering",
    "--report",
    "--as-launcher",
}  # (the CMake package's launcher: test_install.py)
SHAPES = ("per-file", "whole-program", "make", "cmake")


class Built:
    """A build's outcome: whether it linked, its output, the dynamic symbols it needs, and
    its sfence instructions."""

    def __init__(self, ok: bool, out: str, exe: Path | None):
        self.ok, self.out, self.syms, self.sfences = ok, out, set(), -1
        if ok and exe is not None:
            nm = subprocess.run(["nm", "-D", "--undefined-only", str(exe)], capture_output=True,
                                text=True, check=True).stdout  # fmt: skip
            self.syms = {ln.split()[-1].split("@")[0] for ln in nm.splitlines() if ln.strip()}
            dis = subprocess.run(["objdump", "-d", str(exe)], capture_output=True, text=True)
            self.sfences = dis.stdout.count("\tsfence")


def build_options(shape: str, name: str, tmp: Path) -> Built:
    src = tmp / f"{shape}-{name}"
    shutil.copytree(OPTIONS, src)
    args = [a.replace("{allocators}", str(src / "allocators")) for a in BUILDS[name]]
    if shape != "per-file":
        args.insert(1, "--whole-program")
    cc = [PMKIT, "cc", *args]
    if shape in ("make", "cmake"):
        ok, out, exe = build_with(shape, src, " ".join(cc), "-O1", "opts")
        return Built(ok, out, exe if ok else None)
    cmds = [
        [*cc, "-O1", "-c", str(src / "lib.c"), "-o", str(src / "lib.o")],
        [*cc, "-O1", "-c", str(src / "main.c"), "-o", str(src / "main.o")],
        ["llvm-ar-16", "rcs", str(src / "libopts.a"), str(src / "lib.o")],
        [*cc, str(src / "main.o"), str(src / "libopts.a"), "-o", str(src / "opts")],
    ]
    out = ""
    for c in cmds:
        r = subprocess.run(c, capture_output=True, text=True)
        out += r.stdout + r.stderr
        if r.returncode:
            return Built(False, out, None)
    return Built(True, out, src / "opts")


def test_every_option_in_every_shape(tmp_path):
    """Each pmkit cc option of robust, clobber and ssapp mode (and the documented -mllvm
    ones) reaches the passes and has its effect, built one file at a time, whole-program,
    with make and with CMake: the build with it shows what the build without it does not."""
    from concurrent.futures import ThreadPoolExecutor

    from pmkit import cc

    documented = set(re.findall(r"^\s+(--[a-z-]+)", cc.help_text(), re.M))
    covered = {o.split()[0].split("=")[0] for o in EFFECTS}
    assert documented - covered == NOT_HERE - covered, documented - covered
    jobs = [(s, n) for s in SHAPES for n in BUILDS]
    with ThreadPoolExecutor(2) as pool:
        built = dict(zip(jobs, pool.map(lambda j: build_options(*j, tmp_path), jobs), strict=True))
    got, want = {}, {}
    for shape in SHAPES:
        for name, why in REFUSALS.items():
            b = built[shape, name]
            got[shape, name] = (b.ok, why in b.out)
            want[shape, name] = (False, True)
        for option, (with_it, without, shows) in EFFECTS.items():
            on, off = built[shape, with_it], built[shape, without]
            assert on.ok, (shape, with_it, on.out)
            got[shape, option] = (shows(on), shows(off))
            want[shape, option] = (True, False)
    assert got == want


# --- robust mode on C++ written like code from elsewhere ---------------------------------

HASHINDEX = Path(__file__).parent / "hashindex"


def hashindex(run, tmp: Path, *args: str, stop: bool = False) -> dict:
    """Build the hash index (tests/cli/hashindex) with pmkit c++ ARGS, traced with its loads,
    and explore it under x86 with --robustness (with `stop`, until 3 images failed)."""
    exe = tmp / "hashindex"
    srcs = [str(HASHINDEX / f) for f in ("pmalloc.cpp", "index.cpp", "main.cpp")]
    r = subprocess.run(
        [PMKIT, "c++", *args, "--trace", "--trace-loads", "-O2", *srcs, "-o", str(exe)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    prog = [str(exe), "run", "{pool}"]
    extra = ["--robustness", *(["--stop-after", "3"] if stop else [])]
    return explore_json(run, tmp, f"{exe} check {{pool}}", prog, "x86", 1200, *extra)


@pytest.mark.parametrize(
    "shape, setting",
    [("whole-program", "base"), ("whole-program", "opt"), ("whole-program", "flit"),
     ("per-file", "opt")],
)  # fmt: skip
def test_hashindex_stripped_and_robust(run, tmp_path, shape, setting):
    """--strip-existing removes the program's own flushes and robust mode places its own:
    through class operator new, a wrapper in another file that aligns with integer arithmetic,
    allocation in constructors and placement new. The dynamic oracle agrees with the analysis:
    no crash image fails its check, and none is one strict persistency cannot produce."""
    whole = ["--whole-program"] if shape == "whole-program" else []
    v = hashindex(run, tmp_path, "--mode=robust", f"--robust-setting={setting}",
                  "--strip-existing", *whole)  # fmt: skip
    rob = v["robustness"]
    assert (v["images_failed"], rob["violating"], rob["whole_image"]) == (0, 0, False), v
    assert v["coverage"]["points_explored"] == v["coverage"]["points_total"], v["coverage"]


def test_hashindex_stripped_without_the_pass_fails(run, tmp_path):
    """The must-fail twin: the program's flushes stripped and none placed
    (-pmkit-robust-strip-only). The check fails, and the robustness oracle names writes of the
    index that needed a write-back."""
    v = hashindex(run, tmp_path, "--mode=robust", "--strip-existing", "--whole-program",
                  "-mllvm", "-pmkit-robust-strip-only", stop=True)  # fmt: skip
    rob = v["robustness"]
    assert v["result"] == "failed" and rob["violating"] > 0, v
    # The writes lost are the index's (index.cpp and the constructors in index.h).
    lost = {os.path.basename(p["lost"].split(":")[0]) for p in rob["violations"]}
    assert lost <= {"index.cpp", "index.h", "main.cpp"} and "index.cpp" in lost, rob
    assert lost_lines(v) and {ln.split(":")[0] for ln in lost_lines(v)} <= {"index.cpp", "index.h"}
