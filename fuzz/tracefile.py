# SPDX-License-Identifier: Apache-2.0
"""pmkit trace files (include/pmkit/trace_format.h, version 4) in Python: build one block by block,
or split one into its blocks and events to change a field. fuzz/make_corpus.py writes the fuzzers'
seed traces with it; tests/cli/test_trace_input.py damages real traces with it."""

from __future__ import annotations

import struct
from dataclasses import dataclass

VERSION = 4
MAGIC = b"PMKTRACE"
PAGE = 4096

HEADER = struct.Struct("<8sIIIIQQI5I")  # pmkit_trace_header, 64 bytes
BLOCK = struct.Struct("<IIQ")  # pmkit_trace_block
EVENT = struct.Struct("<QQQIBBH")  # pmkit_trace_event, 32 bytes
POOL = struct.Struct("<IIQQQQQ")  # pmkit_trace_pool
STRING = struct.Struct("<IHH")  # pmkit_trace_string
END = struct.Struct("<QQ")  # pmkit_trace_end

TB_EVENTS, TB_STRING, TB_POOL, TB_END = 1, 2, 3, 4
STR_LOC, STR_MARK, STR_STACK = 1, 2, 3
(STORE, NTSTORE, RMW, MEMSET, FLUSH, FENCE, LOAD, MARK_BEGIN, MARK_END, POOL_OPEN, POOL_CLOSE,
 ACQUIRE, RELEASE, SEQPOINT, CALL) = range(1, 16)  # fmt: skip
CLFLUSH, CLFLUSHOPT, CLWB = 1, 2, 3
SFENCE, MFENCE, LOCKED = 1, 2, 3
SYNC_VOLATILE, SYNC_RMW, SYNC_FAILED = 1, 2, 4


def pad8(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 8)


def str_id(text: str) -> int:
    """The id of a string record: 32-bit FNV-1a of the text, never 0."""
    h = 2166136261
    for c in text.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h or 1


def checksum(image: bytes) -> int:
    """pmkit_trace_checksum: 64-bit FNV-1a over the image's 8-byte words."""
    h = 0xCBF29CE484222325
    for (w,) in struct.iter_unpack("<Q", image):
        h = ((h ^ w) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def header(version: int = VERSION, flags: int = 0) -> bytes:
    return HEADER.pack(MAGIC, version, HEADER.size, EVENT.size, flags, 1234, 0, 0, 0, 0, 0, 0, 0)


def block(kind: int, payload: bytes, tid: int = 0) -> bytes:
    return BLOCK.pack(kind, tid, len(payload)) + payload


def event(seq, kind, addr=0, arg=0, size=0, aux=0, loc=0, payload=b"") -> bytes:
    """One event; a store of size 0 carries `payload` (arg defaults to its length)."""
    if payload and not arg:
        arg = len(payload)
    return EVENT.pack(seq, addr, arg, loc, kind, size, aux) + pad8(payload)


def events_block(tid: int, *events: bytes) -> bytes:
    return block(TB_EVENTS, b"".join(events), tid)


def strings_block(*records: tuple[int, str]) -> bytes:
    """STRING records (kind, text); ids are the texts' str_id."""
    out = b""
    for kind, text in records:
        t = text.encode()
        out += STRING.pack(str_id(text), kind, len(t)) + pad8(t)
    return block(TB_STRING, out)


def stacks_block(*stacks: tuple[int, list[int]]) -> bytes:
    """STACK records (id, location ids, the event's own first)."""
    out = b""
    for sid, ids in stacks:
        t = struct.pack(f"<{len(ids)}I", *ids)
        out += STRING.pack(sid, STR_STACK, len(t)) + pad8(t)
    return block(TB_STRING, out)


def pool_block(pool_id: int, seq: int, base: int, size: int, path: str, pages=None) -> bytes:
    """A POOL block whose initial image is zero but for `pages` ({index: 4096 bytes})."""
    pages = dict(sorted((pages or {}).items()))
    image = bytearray(size)
    for i, data in pages.items():
        image[i * PAGE : (i + 1) * PAGE] = data
    p = path.encode()
    body = POOL.pack(pool_id, len(p), seq, base, size, checksum(bytes(image)), len(pages))
    body += pad8(p) + b"".join(struct.pack("<Q", i) + d for i, d in pages.items())
    return block(TB_POOL, body)


def end_block(events: int, dropped: int = 0) -> bytes:
    return block(TB_END, END.pack(events, dropped))


@dataclass
class Block:
    offset: int  # of its header
    kind: int
    tid: int
    size: int

    @property
    def payload(self) -> int:
        return self.offset + BLOCK.size


def blocks(data: bytes) -> list[Block]:
    """The blocks of a well-formed trace, in file order."""
    out, off = [], HEADER.size
    while off < len(data):
        kind, tid, size = BLOCK.unpack_from(data, off)
        out.append(Block(off, kind, tid, size))
        off += BLOCK.size + size
    return out


def events(data: bytes, b: Block) -> list[tuple[int, tuple]]:
    """The events of an EVENTS block: (offset, (seq, addr, arg, loc, kind, size, aux))."""
    out, off, end = [], b.payload, b.payload + b.size
    while off < end:
        e = EVENT.unpack_from(data, off)
        out.append((off, e))
        off += EVENT.size
        if e[4] in (STORE, NTSTORE, RMW) and e[5] == 0:
            off += (e[2] + 7) & ~7
    return out


def block_of(data: bytes, kind: int) -> Block:
    """The first block of a kind."""
    return next(b for b in blocks(data) if b.kind == kind)


def event_of(data: bytes, kind: int) -> int:
    """The offset of the first event of a kind, in file order."""
    for b in blocks(data):
        if b.kind == TB_EVENTS:
            for off, e in events(data, b):
                if e[4] == kind:
                    return off
    raise LookupError(f"no event of kind {kind}")


def string_of(data: bytes, kind: int) -> int:
    """The offset of the first STRING record of a kind, in file order."""
    for b in blocks(data):
        off, end = b.payload, b.payload + b.size
        while b.kind == TB_STRING and off < end:
            _, k, n = STRING.unpack_from(data, off)
            if k == kind:
                return off
            off += STRING.size + ((n + 7) & ~7)
    raise LookupError(f"no string record of kind {kind}")


def patched(data: bytes, off: int, fmt: str, value: int) -> bytes:
    """`data` with the field at `off` (struct format `fmt`) set to `value`."""
    buf = bytearray(data)
    struct.pack_into(fmt, buf, off, value)
    return bytes(buf)


# Offsets of fields inside their records, for patched().
EV_ADDR, EV_ARG, EV_AUX = 8, 16, 30
POOL_BASE = 16  # in a POOL block's payload
END_EVENTS, END_DROPPED = 0, 8  # in the END block's payload
