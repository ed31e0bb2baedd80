# SPDX-License-Identifier: Apache-2.0
"""What every part of the real-program tier shares: its failure, its progress line, its build
step."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import debsrc

JOBS = str(min(2, os.cpu_count() or 1))


class Failed(Exception):
    """A check did not hold; the message says which and how much it covered."""


def say(msg: str) -> None:
    print(msg, flush=True)


def run(cmd: list[str], cwd: Path, log: Path, env: dict | None = None) -> None:
    """A build step, its output appended to log; a failure shows the log's end."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if r.returncode != 0:
        tail = log.read_text().splitlines()[-25:]
        raise Failed(f"{cmd[0]} failed ({r.returncode}); the end of {log}:\n" + "\n".join(tail))


def fresh_tree(package: str, pin: str, work: Path, name: str) -> tuple[Path, str, Path]:
    """A copy of a Debian source tree (debsrc.fetch) to build in: (tree, version, build log)."""
    tree, version = debsrc.fetch(package, pin, log=say)
    src = work / name
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(tree, src, symlinks=True)
    log = work / f"{name}-build.log"
    log.unlink(missing_ok=True)
    return src, version, log
