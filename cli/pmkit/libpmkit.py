# SPDX-License-Identifier: Apache-2.0
"""ctypes bindings for the part of libpmkit the command needs: opening, inspecting, checking and
collecting pools. The C library does the work; this module only calls it and turns its
negative PMKIT_E_* codes into PoolError with the library's message."""

from __future__ import annotations

import ctypes as C
import os
from dataclasses import dataclass

from pmkit import paths

# Errors that mean "this file is not a good pool", as opposed to a usage or environment problem,
# by the names pmkit_strerror gives them (the library's codes are its own: never copied here).
VALIDATION_ERRORS = {"PMKIT_E_TRUNCATED", "PMKIT_E_CORRUPT", "PMKIT_E_FOREIGN", "PMKIT_E_VERSION"}

POOL_INSPECT = 0x1
GC_OFFSETS = 0x1
LAYOUT_MAX = 48


class PoolError(Exception):
    def __init__(self, code: int, name: str, message: str):
        super().__init__(message)
        self.code = code
        self.name = name


class _Opts(C.Structure):
    _fields_ = [("layout", C.c_char_p), ("base", C.c_size_t), ("flags", C.c_uint)]


class _Info(C.Structure):
    _fields_ = [
        ("layout_version", C.c_uint32),
        ("uuid", C.c_uint8 * 16),
        ("layout", C.c_char * LAYOUT_MAX),
        ("base", C.c_uint64),
        ("size", C.c_uint64),
        ("generation", C.c_uint64),
        ("heap_off", C.c_uint64),
        ("chunk_size", C.c_uint64),
        ("nchunks", C.c_uint64),
        ("chunks_free", C.c_uint64),
        ("chunks_small", C.c_uint64),
        ("chunks_large", C.c_uint64),
        ("blocks_used", C.c_uint64),
        ("bytes_used", C.c_uint64),
        ("root_off", C.c_uint64),
        ("root_size", C.c_uint64),
        ("nthreads", C.c_uint32),
        ("threads_busy", C.c_uint32),
    ]


class _CheckReport(C.Structure):
    _fields_ = [
        ("run_gaps", C.c_uint64),
        ("suspects", C.c_uint64),
        ("suspect_off", C.c_uint64),
        ("suspect_from", C.c_uint64),
    ]


class _RepairStats(C.Structure):
    _fields_ = [
        (name, C.c_uint64)
        for name in (
            "blocks_kept",
            "blocks_freed",
            "bytes_freed",
            "blocks_restored",
            "table_fixed",
            "headers_fixed",
            "state_fixed",
            "contexts_fixed",
            "bytes_cut",
        )
    ]


_NOTE = C.CFUNCTYPE(None, C.c_void_p, C.c_char_p)
REPAIR_DRY_RUN = 0x1


class _GcStats(C.Structure):
    _fields_ = [
        ("blocks_live", C.c_uint64),
        ("blocks_freed", C.c_uint64),
        ("bytes_freed", C.c_uint64),
        ("suspects", C.c_uint64),
    ]


@dataclass
class PoolInfo:
    layout_version: int
    uuid: str
    layout: str
    base: int
    size: int
    generation: int
    heap_off: int
    chunk_size: int
    nchunks: int
    chunks_free: int
    chunks_small: int
    chunks_large: int
    blocks_used: int
    bytes_used: int
    root_off: int
    root_size: int
    nthreads: int
    threads_busy: int


_lib = None


def lib() -> C.CDLL:
    global _lib
    if _lib is None:
        p = paths.find().libdir / "libpmkit.so"
        if not p.exists():
            raise paths.EnvError(f"{p} is missing: run 'make build' first")
        # The library reads its options once, as it loads. The crash-emulation knobs are for
        # the programs under test, not for this command: loaded with them, `pool check` could
        # stop with exit 86 at a crash point, or write its own count over a program's report.
        # The programs this command starts still get them.
        knobs = {k: v for k, v in os.environ.items() if k.startswith("PMKIT_CRASH_")}
        for k in knobs:
            del os.environ[k]
        try:
            L = C.CDLL(str(p))
        finally:
            os.environ.update(knobs)
        L.pmkit_errormsg.restype = C.c_char_p
        L.pmkit_strerror.restype = C.c_char_p
        L.pmkit_strerror.argtypes = [C.c_int]
        L.pmkit_pool_create.argtypes = [C.c_char_p, C.c_size_t, C.POINTER(_Opts), C.c_void_p]
        L.pmkit_pool_open.argtypes = [C.c_char_p, C.POINTER(_Opts), C.c_void_p]
        L.pmkit_pool_close.argtypes = [C.c_void_p]
        L.pmkit_pool_stat.argtypes = [C.c_void_p, C.POINTER(_Info)]
        L.pmkit_pool_check.argtypes = [C.c_void_p]
        L.pmkit_pool_check_report.argtypes = [C.c_void_p, C.c_uint, C.POINTER(_CheckReport)]
        L.pmkit_pool_repair.argtypes = [
            C.c_char_p,
            C.c_uint,
            _NOTE,
            C.c_void_p,
            C.POINTER(_RepairStats),
        ]
        L.pmkit_pool_gc.argtypes = [C.c_void_p, C.c_uint, C.POINTER(_GcStats)]
        L.pmkit_domain.restype = C.c_int
        L.pmkit_flush_kind.restype = C.c_int
        L.pmkit_flush_name.restype = C.c_char_p
        L.pmkit_flush_name.argtypes = [C.c_int]
        _lib = L
    return _lib


def _raise(rc: int) -> None:
    if rc < 0:
        L = lib()
        raise PoolError(
            rc, L.pmkit_strerror(rc).decode(), L.pmkit_errormsg().decode(errors="surrogateescape")
        )


class Pool:
    """An open pool; use as a context manager."""

    def __init__(self, handle: C.c_void_p):
        self._h = handle

    @classmethod
    def create(cls, path: str, size: int, layout: str = "", base: int = 0) -> Pool:
        h = C.c_void_p()
        opts = _Opts(layout.encode(), base, 0)
        _raise(lib().pmkit_pool_create(os.fsencode(path), size, C.byref(opts), C.byref(h)))
        return cls(h)

    @classmethod
    def open(cls, path: str, inspect: bool = False) -> Pool:
        h = C.c_void_p()
        opts = _Opts(None, 0, POOL_INSPECT if inspect else 0)
        _raise(lib().pmkit_pool_open(os.fsencode(path), C.byref(opts), C.byref(h)))
        return cls(h)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._h:
            lib().pmkit_pool_close(self._h)
            self._h = None

    def info(self) -> PoolInfo:
        i = _Info()
        _raise(lib().pmkit_pool_stat(self._h, C.byref(i)))
        u = bytes(i.uuid).hex()
        fields = {f: getattr(i, f) for f, _ in _Info._fields_ if f not in ("uuid", "layout")}
        return PoolInfo(
            uuid=f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}",
            layout=i.layout.decode(errors="replace"),
            **fields,
        )

    def check(self) -> None:
        _raise(lib().pmkit_pool_check(self._h))

    def check_report(self, offsets: bool = False) -> dict[str, int]:
        """The full check and, if it passes, what the walk of the reachable heap found."""
        r = _CheckReport()
        _raise(lib().pmkit_pool_check_report(self._h, GC_OFFSETS if offsets else 0, C.byref(r)))
        return {f: getattr(r, f) for f, _ in _CheckReport._fields_}

    def gc(self, offsets: bool = False) -> tuple[int, int, int, int]:
        """(blocks live, blocks freed, bytes freed, suspects)."""
        s = _GcStats()
        _raise(lib().pmkit_pool_gc(self._h, GC_OFFSETS if offsets else 0, C.byref(s)))
        return s.blocks_live, s.blocks_freed, s.bytes_freed, s.suspects


def repair(path: str, dry_run: bool) -> tuple[dict[str, int], list[str]]:
    """Rebuild the allocator metadata of the pool file at path (see pmkit_pool_repair): the
    counts of what changed (or would change) and one line per change."""
    notes: list[str] = []
    note = _NOTE(lambda _arg, line: notes.append(line.decode(errors="surrogateescape")))
    st = _RepairStats()
    rc = lib().pmkit_pool_repair(
        os.fsencode(path), REPAIR_DRY_RUN if dry_run else 0, note, None, C.byref(st)
    )
    _raise(rc)
    return {f: getattr(st, f) for f, _ in _RepairStats._fields_}, notes
