# SPDX-License-Identifier: Apache-2.0
"""The trace reader refuses bad input: each malformation of a real trace (the bundled key-value
store, recorded once) makes `pmkit explore --trace` and `pmkit sim` exit 2 with one line on stderr
naming what is wrong, within seconds; the trace as recorded still explores and simulates. The
traces are damaged with fuzz/tracefile.py, the helper the fuzzers' seed corpus is written with."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BUILD, ROOT

sys.path.insert(0, str(ROOT / "fuzz"))
import tracefile as tf  # noqa: E402

KV = BUILD / "examples" / "kvstore"
KV_TRACED = KV / "kvstore-traced"

pytestmark = pytest.mark.skipif(
    not KV_TRACED.exists(), reason="traced builds need the pass plugin (PMKIT_BUILD_PASSES)"
)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> bytes:
    """A trace of a short kvstore run (a few hundred events, one pool)."""
    d = tmp_path_factory.mktemp("trace-input")
    shm = Path("/dev/shm")
    pool = (shm if shm.is_dir() else d) / f"pmkit-trace-input-{os.getpid()}.pool"
    pool.unlink(missing_ok=True)
    subprocess.run([str(KV / "kvstore"), "create", str(pool), "--size", "2"], check=True)
    trace = d / "kv.trace"
    env = dict(os.environ, PMKIT_TRACE=str(trace), PMKIT_DOMAIN="adr")
    args = ["--ops", "12", "--seed", "5", "--keys", "6", "--quiet"]
    try:
        subprocess.run([str(KV_TRACED), "run", str(pool), *args], env=env, check=True)
    finally:
        pool.unlink(missing_ok=True)
    return trace.read_bytes()


def pool_range(data: bytes) -> tuple[int, int]:
    b = tf.block_of(data, tf.TB_POOL)
    base, size = struct.unpack_from("<QQ", data, b.payload + tf.POOL_BASE)
    return base, size


def store8(data: bytes) -> int:
    """The offset of the first 8-byte STORE (no payload follows it)."""
    for b in tf.blocks(data):
        if b.kind == tf.TB_EVENTS:
            for off, e in tf.events(data, b):
                if e[4] == tf.STORE and e[5] == 8:
                    return off
    raise LookupError("no 8-byte store")


def end_in_middle(data: bytes) -> bytes:
    """The END block moved before the last EVENTS block."""
    bs = tf.blocks(data)
    end = bs[-1]
    ev = [b for b in bs if b.kind == tf.TB_EVENTS][-1]
    return data[: ev.offset] + data[end.offset :] + data[ev.offset : end.offset]


def memset_2_40(data: bytes) -> bytes:
    off = tf.event_of(data, tf.MEMSET)
    return tf.patched(data, off + tf.EV_ARG, "<Q", 1 << 40)


def store_past_end(data: bytes) -> bytes:
    base, size = pool_range(data)
    return tf.patched(data, store8(data) + tf.EV_ADDR, "<Q", base + size - 4)


def fence_as_seqpoint(data: bytes) -> bytes:
    """A FENCE (addr, arg and size 0) turned into a SEQPOINT with an unknown flag."""
    off = tf.event_of(data, tf.FENCE)
    data = tf.patched(data, off + 28, "<B", tf.SEQPOINT)
    return tf.patched(data, off + tf.EV_AUX, "<H", 0x8)


def end_field(field: int, value: int):
    return lambda d: tf.patched(d, tf.block_of(d, tf.TB_END).payload + field, "<Q", value)


# name: (damage, words the one line of stderr must hold)
MALFORMED = {
    "dropped": (end_field(tf.END_DROPPED, 2), "dropped 2 events"),
    "end-count": (end_field(tf.END_EVENTS, 7), "counts 7 events"),
    "end-in-middle": (end_in_middle, "follows the END block"),
    "thread-id": (
        lambda d: tf.patched(d, tf.block_of(d, tf.TB_EVENTS).offset + 4, "<I", 0xFFFFFFFF),
        "thread id 4294967295 out of range",
    ),
    "memset-2^40": (memset_2_40, "runs past the end of its pool"),
    "pool-base-0": (
        lambda d: tf.patched(d, tf.block_of(d, tf.TB_POOL).payload + tf.POOL_BASE, "<Q", 0),
        "has base 0",
    ),
    "store-outside": (
        lambda d: tf.patched(d, store8(d) + tf.EV_ADDR, "<Q", 0x1000),
        "outside every pool",
    ),
    "store-past-end": (store_past_end, "runs past the end of its pool"),
    "flush-kind": (
        lambda d: tf.patched(d, tf.event_of(d, tf.FLUSH) + tf.EV_AUX, "<H", 7),
        "unknown flush kind 7",
    ),
    "fence-kind": (
        lambda d: tf.patched(d, tf.event_of(d, tf.FENCE) + tf.EV_AUX, "<H", 4),
        "unknown fence kind 4",
    ),
    "sync-flags": (fence_as_seqpoint, "unknown sync flags"),
    "stack-length": (
        lambda d: tf.patched(d, tf.string_of(d, tf.STR_STACK) + 6, "<H", 2),
        "a call stack record of 2 bytes",
    ),
    "stack-in-version-3": (lambda d: tf.patched(d, 8, "<I", 3), "kind 3 (ids are non-zero"),
    "pool-open": (
        lambda d: tf.patched(d, tf.event_of(d, tf.POOL_OPEN) + tf.EV_ARG, "<Q", 5),
        "matches no POOL block",
    ),
}


def refused(run, words: str, *args: str):
    start = time.monotonic()
    r = run(*args)
    took = time.monotonic() - start
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert took < 10, f"{args[0]} took {took:.1f} s to refuse the trace"


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_trace_is_refused(run, good, tmp_path, name):
    damage, words = MALFORMED[name]
    bad = tmp_path / f"{name}.trace"
    bad.write_bytes(damage(good))
    assert bad.read_bytes() != good
    refused(run, words, "explore", "--no-progress", "--trace", str(bad), "--check", "true {pool}")
    refused(run, words, "sim", str(bad))


def test_valid_trace_still_read(run, good, tmp_path):
    t = tmp_path / "good.trace"
    t.write_bytes(good)
    r = run(
        "explore", "--no-progress", "--budget", "200", "--trace", str(t), "--check", "true {pool}"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("sim", "--model", "scp,arp", str(t))
    assert r.returncode == 0, r.stderr
    assert "scp" in r.stdout


def test_incomplete_trace_is_refused_by_both(run, good, tmp_path):
    t = tmp_path / "cut.trace"
    t.write_bytes(good[: tf.blocks(good)[-1].offset])  # everything but the END block
    refused(
        run, "incomplete", "explore", "--no-progress", "--trace", str(t), "--check", "true {pool}"
    )
    refused(run, "incomplete", "sim", str(t))
