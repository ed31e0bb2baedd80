# SPDX-License-Identifier: Apache-2.0
"""What every part of the real-program tier shares: its failure, its progress line, its build
step."""

from __future__ import annotations

import subprocess
from pathlib import Path


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
