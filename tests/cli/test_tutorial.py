# SPDX-License-Identifier: Apache-2.0
"""The tutorial of docs/modes/README.md runs as written, so the page cannot rot.

Every ```console block of the page is a session: `$ ` lines are commands, the lines after
one are its output (stdout and stderr together), `[exit N]` its exit status when not 0. In
the expected output a line `...` stands for any lines (none included) and `...` inside a line
for any text. The commands run in order in one shell, in an empty folder holding
examples/tally/tally.c, with this tree's `pmkit` first on PATH."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "modes" / "README.md"
MARK = "@@pmkit-tutorial-command@@"


def sessions(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of every command of the page's console blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console\n(.*?)^```", text, re.M | re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
            else:
                raise AssertionError(f"output before any command in a console block: {line!r}")
    return out


def line_matches(pattern: str, line: str) -> bool:
    parts = [re.escape(p) for p in pattern.split("...")]
    return re.fullmatch(".*".join(parts), line) is not None


def matches(expected: list[str], got: list[str]) -> bool:
    """Whether got fits expected, a `...` line matching any run of lines."""
    if not expected:
        return not got
    if expected[0] == "...":
        return any(matches(expected[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and line_matches(expected[0], got[0]) and matches(expected[1:], got[1:])


def test_the_page_has_a_session_per_mode():
    cmds = " ".join(c for c, _ in sessions(PAGE.read_text()))
    for mode in ("robust", "clobber", "ssapp", "arp"):
        assert f"--mode={mode}" in cmds, mode
    assert "pmkit wpp run" in cmds


def test_matching_can_fail():
    assert matches(["a", "...", "c ... d"], ["a", "x", "y", "c 12 d"])
    assert not matches(["a", "...", "c ... d"], ["a", "x", "c 12 e"])
    assert not matches(["a"], ["a", "b"])  # extra output is a difference
    assert matches(["..."], [])


@pytest.mark.skipif(not shutil.which("musl-gcc"), reason="wpp needs musl-gcc (musl-tools)")
def test_tutorial_runs_as_written(tmp_path):
    steps = sessions(PAGE.read_text())
    shutil.copy(ROOT / "examples" / "tally" / "tally.c", tmp_path)
    script = ["exec 2>&1"]
    for i, (cmd, _) in enumerate(steps):
        script += [f"echo '{MARK} {i}'", cmd, 's=$?; [ "$s" -eq 0 ] || echo "[exit $s]"']
    bindir = Path(sys.executable).parent  # the venv's, where pmkit is
    r = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    chunks = r.stdout.split(MARK + " ")[1:]
    got = {int(c.split("\n", 1)[0]): c.split("\n", 1)[1].splitlines() for c in chunks}
    bad = []
    for i, (cmd, want) in enumerate(steps):
        out = [ln.rstrip() for ln in got.get(i, ["(not run)"])]
        if not matches([w.rstrip() for w in want], out):
            bad.append(f"$ {cmd}\n  expected:\n    " + "\n    ".join(want) + "\n  got:\n    "
                       + "\n    ".join(out[-40:]))  # fmt: skip
    assert not bad, "\n\n".join(bad)
