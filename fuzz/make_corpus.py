#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the fuzzers' seed corpus: tiny traces, valid and damaged, in fuzz/corpus/trace_reader/,
and the same with pmkit-sim options in front (first line) in fuzz/corpus/sim_input/. Run it again
after a change of the trace format; the files are committed. Regression inputs of bugs the fuzzers
found (crash-*) sit beside these and are not touched."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tracefile as tf  # noqa: E402

HERE = Path(__file__).resolve().parent / "corpus"
BASE = 0x200000000000
SIZE = 64 << 10  # a 64 KiB pool: 16 pages
LOC = "kv.c:12:3"


def thread0(seq: int, base: int = BASE) -> list[bytes]:
    """Thread 0 of a small run: every kind of write, flushes, fences, a marked operation."""
    loc = tf.str_id(LOC)
    s = iter(range(seq, seq + 100))
    return [
        tf.event(next(s), tf.MARK_BEGIN, arg=tf.str_id("put")),
        tf.event(next(s), tf.STORE, base + 64, 0x1122334455667788, 8, loc=loc),
        tf.event(next(s), tf.STORE, base + 72, payload=b"hello, pool!!", loc=loc),
        tf.event(next(s), tf.MEMSET, base + 128, 40, aux=0xAB),
        tf.event(next(s), tf.NTSTORE, base + 256, 7, 4),
        tf.event(next(s), tf.FLUSH, base + 64, aux=tf.CLWB),
        tf.event(next(s), tf.FLUSH, base + 128, aux=tf.CLFLUSHOPT),
        tf.event(next(s), tf.FENCE, aux=tf.SFENCE),
        tf.event(next(s), tf.RMW, base + 512, 9, 8),
        tf.event(next(s), tf.LOAD, base + 64, 0x88, 1),
        tf.event(next(s), tf.LOAD, base + 72, 13),
        tf.event(next(s), tf.CALL, base + 72, loc=loc),
        tf.event(next(s), tf.FLUSH, base + 512, aux=tf.CLFLUSH),
        tf.event(next(s), tf.FENCE, aux=tf.MFENCE),
        tf.event(next(s), tf.MARK_END, arg=tf.str_id("put")),
    ]


STACK = 0x5EC0_0001  # a call stack: LOC, called from CALLER and MAIN
CALLER, MAIN = "kv.c:40:5 <- kv.c:52:3", "pmkit:runtime/x.c:1:1"


def small(version: int = tf.VERSION, end: bool = True) -> bytes:
    ev = [tf.event(1, tf.POOL_OPEN, BASE, 0), *thread0(2)]
    if version < 3:
        ev = [e for e in ev if tf.EVENT.unpack_from(e)[4] != tf.CALL]
    if version >= 4:  # the first store's place is a call stack
        e = list(tf.EVENT.unpack_from(ev[2]))
        e[3] = STACK
        ev[2] = tf.EVENT.pack(*e)
    out = tf.header(version) + tf.pool_block(0, 1, BASE, SIZE, "/dev/shm/kv.pool")
    out += tf.strings_block((tf.STR_LOC, LOC), (tf.STR_MARK, "put"))
    if version >= 4:
        out += tf.strings_block((tf.STR_LOC, CALLER), (tf.STR_LOC, MAIN))
        ids = [tf.str_id(LOC), tf.str_id(MAIN), tf.str_id(CALLER)]
        out += tf.stacks_block((STACK, ids))
    out += tf.events_block(0, *ev)
    return out + (tf.end_block(len(ev)) if end else b"")


def threads() -> bytes:
    """Two threads publishing through a release and an acquire, a background one, sequence points;
    thread 1's block comes before the POOL block in the file."""
    flag = 0x7FFF0000  # a DRAM variable
    t1 = [
        tf.event(20, tf.MARK_BEGIN, arg=tf.str_id("run")),
        tf.event(21, tf.ACQUIRE, flag, 1, 8),
        tf.event(22, tf.STORE, BASE + 4096, 5, 8),
        tf.event(23, tf.SEQPOINT),
        tf.event(24, tf.RELEASE, BASE + 8192, 1, 8, aux=tf.SYNC_RMW),
        tf.event(25, tf.ACQUIRE, BASE + 8192, 0, 8, aux=tf.SYNC_RMW | tf.SYNC_FAILED),
        tf.event(26, tf.MARK_END, arg=tf.str_id("run")),
    ]
    t2 = [
        tf.event(30, tf.MARK_BEGIN, arg=tf.str_id("bg")),
        tf.event(31, tf.RELEASE, flag, 2, 8, aux=tf.SYNC_VOLATILE),
        tf.event(32, tf.STORE, BASE + 8200, 6, 2),
        tf.event(33, tf.SEQPOINT, aux=tf.SYNC_VOLATILE),
    ]
    t0 = [
        tf.event(1, tf.POOL_OPEN, BASE, 0),
        *thread0(2),
        tf.event(17, tf.RELEASE, flag, 1, 8),
        tf.event(40, tf.POOL_CLOSE, BASE, 0x1234),
    ]
    out = tf.header() + tf.events_block(1, *t1)
    out += tf.pool_block(0, 1, BASE, SIZE, "/dev/shm/t.pool")
    out += tf.strings_block((tf.STR_MARK, "run"), (tf.STR_MARK, "bg"), (tf.STR_LOC, LOC))
    out += tf.events_block(0, *t0) + tf.events_block(2, *t2)
    return out + tf.end_block(len(t0) + len(t1) + len(t2))


def reopen() -> bytes:
    """A pool with a page of data, closed and opened again at the same base, and a second pool."""
    page = bytes(range(256)) * 16
    other = BASE + (1 << 30)
    ev = [
        tf.event(1, tf.POOL_OPEN, BASE, 0),
        tf.event(2, tf.STORE, BASE + 8, 1, 8),
        tf.event(3, tf.POOL_CLOSE, BASE, 0),
        tf.event(4, tf.POOL_OPEN, BASE, 1),
        tf.event(5, tf.STORE, BASE + 16, 2, 8),
        tf.event(6, tf.POOL_OPEN, other, 2),
        tf.event(7, tf.MEMSET, other, 4096, aux=1),
        tf.event(8, tf.FLUSH, other + 64, aux=tf.CLWB),
        tf.event(9, tf.FENCE, aux=tf.LOCKED),
    ]
    out = tf.header() + tf.pool_block(0, 1, BASE, SIZE, "/dev/shm/a.pool", {0: page})
    out += tf.pool_block(1, 4, BASE, SIZE, "/dev/shm/a.pool", {0: page})
    out += tf.pool_block(2, 6, other, SIZE, "/dev/shm/b.pool")
    return out + tf.events_block(0, *ev) + tf.end_block(len(ev))


def bad_seeds(good: bytes) -> dict[str, bytes]:
    """The malformations the reader refuses, each in one copy of a good trace."""
    end = tf.block_of(good, tf.TB_END).payload
    return {
        "bad-dropped": tf.patched(good, end + tf.END_DROPPED, "<Q", 3),
        "bad-end-count": tf.patched(good, end + tf.END_EVENTS, "<Q", 99),
        "bad-tid": tf.patched(good, tf.block_of(good, tf.TB_EVENTS).offset + 4, "<I", 0xFFFFFFFF),
        "bad-pool-base": tf.patched(
            good, tf.block_of(good, tf.TB_POOL).payload + tf.POOL_BASE, "<Q", 0
        ),
        "bad-memset": tf.patched(good, tf.event_of(good, tf.MEMSET) + tf.EV_ARG, "<Q", 1 << 40),
        "bad-outside": tf.patched(good, tf.event_of(good, tf.STORE) + tf.EV_ADDR, "<Q", 0x1000),
        "bad-flush-kind": tf.patched(good, tf.event_of(good, tf.FLUSH) + tf.EV_AUX, "<H", 7),
        "bad-fence-kind": tf.patched(good, tf.event_of(good, tf.FENCE) + tf.EV_AUX, "<H", 9),
        "bad-end-middle": good + tf.events_block(0, tf.event(500, tf.FENCE, aux=tf.SFENCE)),
        "bad-stack-len": tf.patched(good, tf.string_of(good, tf.STR_STACK) + 6, "<H", 6),
        "bad-stack-v3": tf.patched(good, 8, "<I", 3),
    }


SIM_OPTIONS = {
    "valid-small": "",
    "valid-threads": "--mark run --model all --coalesce",
    "valid-threads-bg": "--background bg --event-cycles 10 --model arp,scp",
    "valid-reopen": "--lines --machine optane --set banks=4 --set row-bytes=128",
    "valid-small-set": "--set tWP=1000 --set cpu-ghz=3.5 --set write-queue=2",
    "bad-set": "--set banks=0",
    "bad-cycles": "--event-cycles 99999999999",
    "bad-model": "--model arp,nope",
}


def main() -> int:
    good = {
        "valid-small": small(),
        "valid-v1": small(version=1),
        "valid-v3": small(version=3),
        "valid-threads": threads(),
        "valid-reopen": reopen(),
        "incomplete": small(end=False),
    }
    seeds = {**good, **bad_seeds(good["valid-small"])}
    reader, sim = HERE / "trace_reader", HERE / "sim_input"
    for d in (reader, sim):
        d.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        (reader / f"{name}.trace").write_bytes(data)
    for name, opts in SIM_OPTIONS.items():
        trace = seeds.get(name) or seeds.get(name.rsplit("-", 1)[0]) or good["valid-small"]
        (sim / f"{name}.in").write_bytes(opts.encode() + b"\n" + trace)
    (sim / "bad-dropped.in").write_bytes(b"\n" + seeds["bad-dropped"])
    (sim / "incomplete.in").write_bytes(b"--model ideal\n" + seeds["incomplete"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
