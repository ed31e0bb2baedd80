# SPDX-License-Identifier: Apache-2.0
"""A one-line progress bar on stderr for long work; silent when stderr is not a terminal
except for a final line, so logs stay readable."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.t0 = time.monotonic()
        self.tty = sys.stderr.isatty()

    def step(self, note: str = "") -> None:
        self.done += 1
        if not self.tty:
            return
        width = 30
        filled = width * self.done // self.total
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r{self.label:<16} [{bar}] {self.done}/{self.total} {note:<24}")
        sys.stderr.flush()

    def close(self) -> None:
        dt = time.monotonic() - self.t0
        if self.tty:
            sys.stderr.write("\r" + " " * 90 + "\r")
        sys.stderr.write(f"{self.label}: {self.done} runs in {dt:.1f} s\n")
        sys.stderr.flush()
