# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the CLI tests: run `python -m pmkit ...` as a user would and capture the result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A second build tree (PMKIT_BUILD_DIR) can be tested beside the default one.
BUILD = Path(os.environ.get("PMKIT_BUILD_DIR", ROOT / "build")).resolve()


def pmkit(*args: str, env: dict | None = None, cwd: Path | None = None):
    return subprocess.run(
        [sys.executable, "-m", "pmkit", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "cli"), **(env or {})),
        cwd=cwd,
    )


@pytest.fixture
def run():
    return pmkit


@pytest.fixture
def shm(tmp_path_factory):
    """A scratch directory on tmpfs when there is one (pools are file-backed)."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else tmp_path_factory.getbasetemp()
    d = base / f"pmkit-test-{os.getpid()}"
    d.mkdir(exist_ok=True)
    yield d
    for f in d.iterdir():
        f.unlink()
    d.rmdir()
