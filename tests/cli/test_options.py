# SPDX-License-Identifier: Apache-2.0
"""The runtime's environment variables (runtime/core/options.def): docs/runtime.md lists exactly
the table, and every variable is checked once, at start-up, whether the program goes on to use
it or not: a bad value warns and falls back, or, for the testing knobs, stops the program."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import BUILD, ROOT

KV = BUILD / "examples" / "kvstore" / "kvstore"


def test_docs_list_the_table():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "options_doc.py")],
                       capture_output=True, text=True, check=True)  # fmt: skip
    assert (
        r.stdout.strip() in (ROOT / "docs" / "runtime.md").read_text()
    ), "docs/runtime.md's table of options is stale: run scripts/options_doc.py --write"
    assert r.stdout.count("| `PMKIT_") == (ROOT / "runtime/core/options.def").read_text().count(
        "\nPMK_OPTION("
    )


def kv(shm, **env):
    pool = shm / "opts.pool"
    pool.unlink(missing_ok=True)
    return subprocess.run([str(KV), "create", str(pool), "--size", "2"], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=60)  # fmt: skip


@pytest.mark.parametrize(
    "env, status, words",
    [
        ({}, 0, None),
        ({"PMKIT_DOMAIN": "eadr"}, 0, None),
        (
            {"PMKIT_DOMAIN": "nvdimm"},
            0,
            "pmkit: PMKIT_DOMAIN=nvdimm: not one of adr, eadr; using adr",
        ),
        (
            {"PMKIT_POOL_VERIFY": "yes"},
            0,
            "PMKIT_POOL_VERIFY=yes: not one of 0, 1, offsets; using 1",
        ),
        (
            {"PMKIT_FLUSH": "wbinvd"},
            0,
            "not one of clwb, clflushopt, clflush, none; using the default",
        ),
        # the testing knobs refuse, even in a program that never reaches their code
        ({"PMKIT_CRASH_AT": "ten"}, 2, "pmkit: PMKIT_CRASH_AT=ten: not a number"),
        ({"PMKIT_CRASH_AT": "-1"}, 2, "PMKIT_CRASH_AT=-1: not a number"),
        # decimal digits, or 0x and hex digits, below 2^64: nothing else (a leading 0 is not
        # octal, a blank or a sign is no number, an overflow is not the largest number)
        ({"PMKIT_CRASH_AT": "0x7fffffffffffffff"}, 0, None),
        ({"PMKIT_CRASH_AT": "000000000000000000000099999999999"}, 0, None),
        ({"PMKIT_CRASH_AT": " 5"}, 2, "PMKIT_CRASH_AT= 5: not a number"),
        ({"PMKIT_CRASH_AT": " -1"}, 2, "not a number"),
        ({"PMKIT_CRASH_AT": "+3"}, 2, "not a number"),
        ({"PMKIT_CRASH_AT": "0x"}, 2, "not a number"),
        ({"PMKIT_CRASH_AT": "18446744073709551616"}, 2, "not a number"),
        ({"PMKIT_CRASH_SEED": "1", "PMKIT_CRASH_EVERY": "0"}, 2, "PMKIT_CRASH_EVERY=0"),
        ({"PMKIT_CRASH_REPORT": "/nonexistent/dir/rep"}, 2, "cannot write PMKIT_CRASH_REPORT"),
        ({"PMKIT_CRASH_POINTS": "fence"}, 2, "not one of fences, stores, all"),
        ({"PMKIT_CLOBBER_RECOVER": "rolback"}, 2, "not one of reexecute, rollback"),
        ({"PMKIT_SSAPP_RECOVER": "Naive"}, 2, "not one of tags, naive, skip"),
    ],
)
def test_bad_values(shm, env, status, words):
    r = kv(shm, **env)
    assert r.returncode == status, r.stderr
    if words is None:
        assert "pmkit:" not in r.stderr, r.stderr
    else:
        assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_command_itself_ignores_crash_emulation(run, shm, tmp_path):
    """The crash knobs are for the programs under test: `pmkit pool` loads libpmkit in its own
    process, where they stopped `pool gc` at its first crash point with exit 86 and made every
    command write its own count over a program's report."""
    pool = shm / "knobs.pool"
    pool.unlink(missing_ok=True)
    report = tmp_path / "report"
    env = {"PMKIT_CRASH_AT": "1", "PMKIT_CRASH_REPORT": str(report)}
    r = run("pool", "create", str(pool), "--size", "4M", env=env)
    assert r.returncode == 0, r.stderr
    assert run("pool", "check", str(pool), env=env).returncode == 0
    r = run("pool", "gc", str(pool), env=env)
    assert r.returncode == 0, r.stderr
    assert not report.exists()
    pool.unlink()
