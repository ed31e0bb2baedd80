/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trace_format.h -- the one binary format of a pmkit trace: written by
 * runtime/trace (libpmkit-trace) while an instrumented program runs, read by
 * explorer/ (`pmkit explore`) and sim/. A trace records, in one global order,
 * every write a program and the pmkit runtime make to a registered pool, with
 * the flushes and fences that order their persistence, so that a reader can
 * rebuild the content of the pool at any point and decide which writes a
 * crash there could have lost. Change it deliberately: bump
 * PMKIT_TRACE_VERSION with any change below and note it in the version log at
 * the end. All integers are little-endian, as written by x86-64.
 *
 * Layout of a trace file:
 *
 *   pmkit_trace_header                      once, at offset 0
 *   { pmkit_trace_block, payload }...       blocks, in the order written
 *
 * Blocks are appended with one write() each, so blocks of different threads
 * interleave but never tear. A trace is complete only if it ends with an END
 * block; anything else means the program did not exit normally.
 *
 * The seq of each event is the trace's only clock. Events carry no wall
 * time: recording costs more than the work between most events, so a
 * reader that needs timing (sim/) applies its own model of the core.
 */
#ifndef PMKIT_TRACE_FORMAT_H
#define PMKIT_TRACE_FORMAT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMKIT_TRACE_VERSION 4u
#define PMKIT_TRACE_MAGIC "PMKTRACE" /* 8 bytes, no NUL in the file */

/* Header flags. */
#define PMKIT_TRACE_F_LOADS 0x1u /* the program was built to trace loads */

typedef struct pmkit_trace_header {
  char magic[8];        /* PMKIT_TRACE_MAGIC                                */
  uint32_t version;     /* PMKIT_TRACE_VERSION                              */
  uint32_t header_size; /* sizeof(pmkit_trace_header): 64                   */
  uint32_t event_size;  /* sizeof(pmkit_trace_event): 32                    */
  uint32_t flags;       /* PMKIT_TRACE_F_*                                  */
  uint64_t pid;         /* process that wrote the trace                     */
  uint64_t start_ns;    /* CLOCK_REALTIME when tracing started              */
  uint32_t abi_version; /* PMKIT_ABI_VERSION of the runtime                 */
  uint32_t reserved[5]; /* zero                                             */
} pmkit_trace_header;
#ifdef __cplusplus
static_assert(sizeof(pmkit_trace_header) == 64, "trace header");
#else
_Static_assert(sizeof(pmkit_trace_header) == 64, "trace header");
#endif

/* Block types. */
enum {
  PMKIT_TB_EVENTS = 1, /* events of one thread, in its program order         */
  PMKIT_TB_STRING = 2, /* pmkit_trace_string records: locations, mark names */
  PMKIT_TB_POOL = 3,   /* a pool was registered: pmkit_trace_pool + image     */
  PMKIT_TB_END = 4,    /* pmkit_trace_end: the program exited normally        */
};

typedef struct pmkit_trace_block {
  uint32_t type; /* PMKIT_TB_*                                          */
  uint32_t tid;  /* EVENTS: the thread's trace id (0 = first thread)   */
  uint64_t size; /* bytes of payload after this header, a multiple of 8 */
} pmkit_trace_block;

/* Event kinds. "Unit" below means the bytes [addr, addr + length). */
enum {
  /* A store of `size` (1, 2, 4 or 8) bytes whose value is the low bytes of
   * `arg`; size 0: a store of `arg` bytes (a memcpy, memmove or a wide
   * vector store) whose bytes follow the event, padded to a multiple of 8.
   * Atomic stores are STOREs too; a seq_cst atomic store also fences. */
  PMKIT_EV_STORE = 1,
  /* A non-temporal store (bypasses the cache): like STORE, and persistent
   * once the thread's next fence completes. */
  PMKIT_EV_NTSTORE = 2,
  /* A locked read-modify-write (atomicrmw, successful cmpxchg): a STORE of
   * the new value (`size`, `arg`) that is also a full fence. */
  PMKIT_EV_RMW = 3,
  /* memset: `arg` bytes at addr set to the byte in `aux`. */
  PMKIT_EV_MEMSET = 4,
  /* A cache-line flush of the line holding addr; aux = PMKIT_FLUSH_* kind
   * as in pmkit.h (1 clflush, 2 clflushopt, 3 clwb). */
  PMKIT_EV_FLUSH = 5,
  /* A fence; aux = PMKIT_FENCE_* below. addr and arg are 0. */
  PMKIT_EV_FENCE = 6,
  /* A load of `size` bytes (value in arg); size 0: a read of `arg` bytes by
   * a library call (memcmp, strcmp, ...), with no value and no payload.
   * Only in programs built to trace loads. */
  PMKIT_EV_LOAD = 7,
  /* pmkit_mark_begin/end: arg is the id of the name (a STRING record). */
  PMKIT_EV_MARK_BEGIN = 8,
  PMKIT_EV_MARK_END = 9,
  /* A pool was registered (opened or created): addr = base, arg = the pool
   * id of its POOL block. Its initial image is in that block. */
  PMKIT_EV_POOL_OPEN = 10,
  /* A pool is being closed: addr = base, arg = checksum of its content at
   * close (see pmkit_trace_pool.checksum), so a reader can verify that it
   * saw every write. */
  PMKIT_EV_POOL_CLOSE = 11,
  /* Synchronisation of language-level persistency (pmkit::atomic,
   * include/pmkit/arp.hpp), recorded wherever the atomic lives, DRAM or
   * pool: addr = the atomic variable, size = its size (0 if larger than 8),
   * arg = the value stored (RELEASE) or loaded (ACQUIRE), 0 if unknown,
   * aux = PMKIT_SYNC_* flags. A release takes its seq before its store and
   * an acquire after its load, so an acquire that reads a release's store
   * has the larger seq. A read-modify-write with acq_rel or seq_cst order
   * is a RELEASE followed by an ACQUIRE. Only the order of these events
   * matters to a reader; they carry no data for the pool image (a
   * persistent atomic's store is also a STORE or RMW event). */
  PMKIT_EV_ACQUIRE = 12,
  PMKIT_EV_RELEASE = 13,
  /* A sequence point (pmkit::sequence_point): every earlier persist of the
   * thread is ordered before every later one. aux = PMKIT_SYNC_* flags;
   * addr and arg are 0. */
  PMKIT_EV_SEQPOINT = 14,
  /* A call to code the trace pass did not instrument (a function only
   * declared in the module: the C library, the kernel through it) that was
   * given a pointer into a pool: addr = that pointer, arg = 0, size = 0,
   * aux = 0, loc = the call site. Recorded before the call. It writes
   * nothing a reader can see; a reader names it when the pool content at
   * close differs from the traced writes (what could have written there).
   * Calls the pass knows to write (read, recv, clock_gettime, ...) are
   * also recorded as the STORE of the bytes they wrote, after the call. */
  PMKIT_EV_CALL = 15,
};

/* Flags of ACQUIRE, RELEASE and SEQPOINT events. */
enum {
  /* pmkit::volatile_sync: the access synchronises threads but has no
   * persist semantics (orders no persists). */
  PMKIT_SYNC_VOLATILE = 0x1,
  /* The access is a read-modify-write (its value is the one written). */
  PMKIT_SYNC_RMW = 0x2,
  /* On an ACQUIRE: not an acquire but the news that the compare-exchange
   * whose RELEASE came just before failed: it wrote nothing, and that
   * release did not happen. */
  PMKIT_SYNC_FAILED = 0x4,
};

enum {
  PMKIT_FENCE_SFENCE = 1,
  PMKIT_FENCE_MFENCE = 2, /* also a seq_cst fence instruction */
  PMKIT_FENCE_LOCKED = 3, /* a locked instruction that wrote nothing (failed
                             cmpxchg, lock-prefixed asm)          */
};

typedef struct pmkit_trace_event {
  uint64_t seq;  /* position in the global order: unique, increasing in each
                    thread, and consistent with the order in which the
                    accesses became visible (see runtime/trace)       */
  uint64_t addr; /* address in the program (pool base + offset)       */
  uint64_t arg;  /* value, length or id: see the kinds                */
  uint32_t loc;  /* source location id (a STRING record), 0 = unknown */
  uint8_t kind;  /* PMKIT_EV_*                                         */
  uint8_t size;  /* 1, 2, 4, 8; 0 for a store with payload             */
  uint16_t aux;  /* kind-specific: flush kind, fence kind, memset byte */
} pmkit_trace_event;
#ifdef __cplusplus
static_assert(sizeof(pmkit_trace_event) == 32, "trace event");
#else
_Static_assert(sizeof(pmkit_trace_event) == 32, "trace event");
#endif

/* STRING payload: records, each padded to a multiple of 8 bytes. Location
 * strings are "file:line:col" or "function:?" without debug info, text for
 * people: an access through a named struct adds " " and the field as the
 * debug info spells it ("t.c:9:14 rec.in[2].b"); code the compiler inlined
 * adds " <- " and the place it was inlined at, innermost first
 * ("h.h:4:6 <- t.c:20:3"); an id is the 32-bit FNV-1a hash of the string
 * (0 is never used). Locations in the pmkit runtime's own code
 * (libpmkit-trace) begin with "pmkit:", so that a reader can tell its
 * writes (allocator, journals) from the program's.
 *
 * A STACK record (version 4) is a call stack: its text is len / 4 location
 * ids (uint32_t), the first the place of the event, each next one the call
 * site of the call the previous one is in, up to PMKIT_TRACE_FRAMES call
 * sites; a stack deeper than that keeps the innermost PMKIT_TRACE_FRAMES -
 * 1 call sites and ends with id 0 ("more calls, not recorded"). An
 * event's loc may name a STACK record instead of a location; a
 * reader shows the first location outside pmkit's code ("pmkit:", pmkit's
 * headers) and system headers as the event's place in the program. Its id is
 * not a hash of its text: readers take it as given. Calls more than
 * PMKIT_TRACE_DEPTH deep record no stack (the event's loc is then a plain
 * location). */
enum { PMKIT_STR_LOC = 1, PMKIT_STR_MARK = 2, PMKIT_STR_STACK = 3 };
#define PMKIT_TRACE_FRAMES 16u /* call sites in a STACK record, at most */
#define PMKIT_TRACE_DEPTH 64u  /* calls deep the recorder follows       */
typedef struct pmkit_trace_string {
  uint32_t id;
  uint16_t kind; /* PMKIT_STR_*                       */
  uint16_t len;  /* bytes of text that follow, no NUL */
} pmkit_trace_string;

/* POOL payload: this header, the path (path_len bytes, padded to 8), then
 * `npages` records of { uint64_t page index; 4096 bytes } for every page of
 * the initial image that is not all zero. */
typedef struct pmkit_trace_pool {
  uint32_t pool_id;  /* 0, 1, ... in order of registration            */
  uint32_t path_len; /* bytes of the path that follows                */
  uint64_t seq;      /* seq of the matching POOL_OPEN event           */
  uint64_t base;     /* mapping address                               */
  uint64_t size;     /* bytes                                         */
  uint64_t checksum; /* pmkit_trace_checksum of the initial image      */
  uint64_t npages;   /* non-zero pages that follow                     */
} pmkit_trace_pool;

#define PMKIT_TRACE_PAGE 4096u

/* END payload. */
typedef struct pmkit_trace_end {
  uint64_t events;  /* events written in EVENTS blocks                 */
  uint64_t dropped; /* events lost (always 0 unless a write failed)    */
} pmkit_trace_end;

/* The checksum of a pool image: 64-bit FNV-1a over its 8-byte words. */
static inline uint64_t pmkit_trace_checksum(const void *p, uint64_t n) {
  const uint64_t *w = (const uint64_t *)p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < n / 8; i++) {
    h ^= w[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/*
 * Version log
 *   1  first version: header, EVENTS/STRING/POOL/END blocks, 32-byte events.
 *   2  ACQUIRE, RELEASE and SEQPOINT events with PMKIT_SYNC_* flags (arp
 *      mode). Readers accept version 1 traces, which have none.
 *   3  CALL events (uninstrumented calls given a pool pointer). Readers
 *      accept versions 1 and 2, which have none.
 *   4  STACK string records, named by the loc of events (call stacks),
 *      and " <- " inlining chains in location strings. Readers accept
 *      versions 1 to 3, which have neither.
 */

#ifdef __cplusplus
}
#endif
#endif /* PMKIT_TRACE_FORMAT_H */
