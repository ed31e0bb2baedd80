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


def build(system: str, tmp: Path, cc: str, cflags: str = "") -> tuple[Path, str]:
    """Build the ledger with `system` (make or cmake); its binary and the build's output."""
    src = tmp / "src"
    shutil.copytree(LEDGER, src)
    flags = f"-O2 {cflags}".strip()
    if system == "make":
        cmds = [["make", "-C", str(src), f"CC={cc}", "AR=llvm-ar-16", f"CFLAGS={flags}"]]
        exe = src / "ledger"
    else:
        b = tmp / "build"
        cmds = [
            ["cmake", "-S", str(src), "-B", str(b), "-G", "Ninja",
             "-DCMAKE_AR=/usr/bin/llvm-ar-16", f"-DCMAKE_C_FLAGS={flags}"],
            ["cmake", "--build", str(b)],
        ]  # fmt: skip
        exe = b / "ledger"
    env = dict(os.environ, CC=cc)
    out = ""
    for c in cmds:
        r = subprocess.run(c, capture_output=True, text=True, env=env)
        out += r.stdout + r.stderr
        assert r.returncode == 0, out
    return exe, out


def explore(run, tmp: Path, exe: Path, model: str, atomic: bool, budget: int = 300) -> dict:
    """The JSON verdict of exploring `ledger run POOL 5` against `ledger check`."""
    pool = tmp / "ledger.pool"
    verdict = tmp / "verdict.json"
    check = f"{exe} check {{pool}}" + (" --atomic" if atomic else "")
    r = run(
        "explore", "--no-progress", "--model", model, "--budget", str(budget),
        "--max-reports", "100", "--json", str(verdict), "--save-dir", str(tmp / "failures"),
        "--check", check, "--",
        str(exe), "run", str(pool), "5",
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
    # eADR: a crash point at every store, 471 of them.
    v = explore(run, tmp_path, exe, model, atomic, 1200 if model == "eadr" else 300)
    # Every crash point explored; the pool's creation has too many images to enumerate.
    assert (v["result"], v["images_failed"]) == ("sampled", 0), v
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
