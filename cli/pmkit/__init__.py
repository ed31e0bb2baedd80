# SPDX-License-Identifier: Apache-2.0
"""pmkit: crash consistency for persistent memory. The `pmkit` command lives in main.py."""

__version__ = "0.2.0"
