/* SPDX-License-Identifier: Apache-2.0 */
/*
 * abi.h -- the contract between pmkit's compiler passes and its runtimes:
 * every function a pass inserts a call to is declared here with the
 * `__pmkit_` prefix, together with the data instrumentation may read inline.
 * Passes and runtimes are built from the same tree, but a program compiled
 * against one ABI version must not run with another: bump PMKIT_ABI_VERSION
 * with any change below and say what changed in the log at the end.
 */
#ifndef PMKIT_ABI_H
#define PMKIT_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMKIT_ABI_VERSION 11u

/* The ABI version the linked runtime implements. Instrumented programs may
 * compare it with PMKIT_ABI_VERSION at start-up. */
extern const uint32_t __pmkit_abi_version;

/* Bounding box [lo, hi) of all open pools, updated at open/close. An address
 * outside it is not in any pool; inside it, pmkit_in_pool() decides. Lets
 * instrumentation skip DRAM accesses with two compares and no call. */
extern uintptr_t __pmkit_pool_lo;
extern uintptr_t __pmkit_pool_hi;

static inline int __pmkit_maybe_pm(const void *p) {
  uintptr_t a = (uintptr_t)p;
  return a >= __pmkit_pool_lo && a < __pmkit_pool_hi;
}

/* A crash point (see PMKIT_CRASH_AT in pmkit.h). Passes insert it where a
 * mode defines one; it returns at once unless crash emulation is armed. */
void __pmkit_crash_point(void);

/* ---- robust mode (the pmkit-robust pass) ---------------------------------
 * Write back every cache line of [addr, addr+len) with the flush
 * instruction the runtime chose (no fence; a no-op under PMKIT_DOMAIN=eadr).
 * The pass calls it after a memcpy, memmove or memset into PM. */
void __pmkit_flush_range(const void *addr, uint64_t len);

/* FliT counters (robust mode's `flit` setting; runtime/flit). The counter
 * of the cache line holding address a is
 *   __pmkit_flit_counters[(a >> PMKIT_FLIT_LINE_SHIFT)
 *                         & (PMKIT_FLIT_COUNTERS - 1)].
 * An atomic write to PM raises it (a locked add) before the write and
 * lowers it (another locked add) after the line's write-back, so the
 * write-back is complete once it drops; an atomic load from PM writes the
 * line back and fences only when the counter is not zero. Lines that hash
 * to one counter share it, which costs write-backs, never correctness. */
#define PMKIT_FLIT_COUNTERS 65536u
#define PMKIT_FLIT_LINE_SHIFT 6
extern uint64_t __pmkit_flit_counters[PMKIT_FLIT_COUNTERS];

/* ---- tracing (the pmkit-trace pass; runtime/trace in libpmkit-trace) ----
 * The pass guards each plain access with __pmkit_maybe_pm() and calls these
 * only for addresses in the box; they record nothing unless PMKIT_TRACE is
 * set. `loc` is a source location id (trace_format.h). Stores, memcpy and
 * memset are recorded before they execute, loads after. */
void __pmkit_trace_store(void *addr, uint64_t val, uint32_t size, uint32_t loc);
void __pmkit_trace_ntstore(void *addr, uint64_t val, uint32_t size,
                           uint32_t loc);
/* len bytes about to be copied from src to addr (memcpy, memmove, a store
 * wider than 8 bytes). */
void __pmkit_trace_write(void *addr, const void *src, uint64_t len,
                         uint32_t loc);
void __pmkit_trace_memset(void *addr, int byte, uint64_t len, uint32_t loc);
void __pmkit_trace_load(const void *addr, uint64_t val, uint32_t size,
                        uint32_t loc);
/* A read by a library call (memcmp, strcmp, a memcpy's source): len bytes,
 * or a NUL-terminated string if len is 0. Only with -pmkit-trace-loads. */
void __pmkit_trace_read(const void *addr, uint64_t len, uint32_t loc);
/* A flush of the line holding addr (kind: PMKIT_FLUSH_* of pmkit.h). Called
 * for every flush, PM or not. */
void __pmkit_trace_flush(const void *addr, uint32_t kind, uint32_t loc);
/* A fence (kind: PMKIT_FENCE_* of trace_format.h). */
void __pmkit_trace_fence(uint32_t kind, uint32_t loc);
/* Atomic accesses are bracketed so that the order of their records matches
 * the order in which they took effect: begin returns a token (negative if
 * addr is not in a pool); end records what the instruction did -- kind is
 * PMKIT_EV_STORE, PMKIT_EV_RMW (with new value val) or PMKIT_EV_FENCE (a
 * failed cmpxchg) -- and releases the token. Outside a pool a locked
 * instruction (any kind but PMKIT_EV_STORE) is a FENCE when the thread has
 * flushes or non-temporal stores for it to order. A locked atomic the pass
 * knows is outside every pool (the stack, a global) calls only end, with
 * token -1. */
int32_t __pmkit_trace_atomic_begin(const void *addr);
void __pmkit_trace_atomic_end(int32_t token, void *addr, uint64_t val,
                              uint32_t size, uint32_t kind, uint32_t loc);
/* A call to code the pass did not instrument (a function only declared in
 * the module) is about to be given addr, a pointer into a pool: a CALL
 * event, so that a reader can name what may have written there. Calls the
 * pass knows to write a buffer (read, recv, fread, clock_gettime, ...)
 * are recorded instead as a __pmkit_trace_write of the bytes written, after
 * they return. */
void __pmkit_trace_call(const void *addr, uint32_t loc);
/* Call stacks: the pass brackets each call in instrumented code that may
 * reach instrumented code (not intrinsics, not the C library) with
 *   d = __pmkit_trace_enter(loc of the call site); call;
 * __pmkit_trace_leave(d); and a function with invokes takes d =
 * __pmkit_trace_depth() on entry and calls __pmkit_trace_leave(d) in each
 * landing pad, so that an exception leaves the stack as deep as the frame that
 * caught it. The recorder names an event's loc by the STACK record of the
 * enclosing call sites (trace_format.h). */
uint32_t __pmkit_trace_enter(uint32_t loc);
void __pmkit_trace_leave(uint32_t depth);
uint32_t __pmkit_trace_depth(void);
/* Source locations of one module: n entries of {id, "file:line:col"},
 * registered by a constructor the pass adds to every module it
 * instruments, also one with no locations (n = 0). */
struct __pmkit_trace_loc {
  uint32_t id;
  const char *text;
};
void __pmkit_trace_locs(const struct __pmkit_trace_loc *locs, uint32_t n);

/* ---- clobber mode (the pmkit-clobber pass; runtime/clobber) -------------
 * A function marked PMKIT_FASE runs as
 *   if (__pmkit_clobber_enter(id)) {       // outermost call, not replayed
 *     __pmkit_clobber_arg*(...) per parameter, in order;
 *     __pmkit_clobber_begin();
 *   }
 *   body: __pmkit_clobber_log(p, n) before each clobber write to [p, p+n)
 *         (a run of them in one block, all before its first write: _batch
 *         for all but the last; a loop's, in a copy of the loop before it:
 *         _batch for each, then __pmkit_clobber_log(NULL, 0)),
 *         __pmkit_clobber_wb after each write to PM (ADR builds);
 *   __pmkit_clobber_exit();                // at every return
 * A nested FASE is part of the outer one. Recovery calls `replay` of the
 * table entry whose id the interrupted section carries, with the logged
 * arguments decoded to words (pointers as addresses again). */
struct __pmkit_clobber_fase {
  uint64_t id;      /* 64-bit FNV-1a of the function's symbol name      */
  const char *name; /* the symbol name, for messages                    */
  void (*replay)(const uint64_t *args); /* calls the FASE with args     */
  uint32_t nargs;
  uint32_t flags; /* PMKIT_CLOBBER_*                                    */
};
/* The FASE logs every PM write and recovery rolls it back instead of
 * re-executing it (the `undo` setting: the classic baseline). */
#define PMKIT_CLOBBER_UNDO 1u
/* The module was compiled without write-backs (-pmkit-clobber-domain=eadr). */
#define PMKIT_CLOBBER_EADR 2u
/* Registers a module's FASEs (a constructor the pass adds). */
void __pmkit_clobber_register(const struct __pmkit_clobber_fase *t, uint32_t n);
/* 1 if this is the outermost FASE call outside recovery: record the
 * arguments and begin; 0 otherwise. */
int __pmkit_clobber_enter(uint64_t id);
/* Arguments: a value (integers, floating point as bits); a pointer (NULL or
 * into a pool: a volatile pointer stops the program with a message); a
 * volatile buffer of len bytes, copied to the log, or with scratch != 0
 * only its length (recovery passes zeroed memory). */
void __pmkit_clobber_arg(uint64_t v);
void __pmkit_clobber_arg_ptr(const void *p);
void __pmkit_clobber_arg_buf(const void *p, uint64_t len, uint32_t scratch);
/* Persist the vlog and open the section (pmkit_fase_begin). */
void __pmkit_clobber_begin(void);
/* Save the size bytes at addr (if in the FASE's pool) before a clobber
 * write; durable before it returns (ADR), with the entries _batch left.
 * size 0 saves nothing and only makes those durable. A no-op outside a
 * FASE. */
void __pmkit_clobber_log(const void *addr, uint64_t size);
/* The same, left to the next __pmkit_clobber_log's fence (ABI 6). */
void __pmkit_clobber_log_batch(const void *addr, uint64_t size);
/* A write to [addr, addr+size) in the FASE's pool: its lines are written
 * back at commit, each once, before the commit's fence (outside a FASE:
 * at once, as __pmkit_flush_range). ABI 6. */
void __pmkit_clobber_wb(const void *addr, uint64_t size);
/* Leave a FASE: the outermost commits (fence, then one ordered store). */
void __pmkit_clobber_exit(void);

/* ---- ssapp mode (the pmkit-ssapp pass; runtime/ssapp) -------------------
 * A function marked PMKIT_FASE is cut into RISEs (read, write, RMW, call
 * and allocation sections, each one block) and runs as
 *   frame = __pmkit_ssapp_enter(id, anchor); // the thread's frame for id
 *   each argument to its frame slot (pointers: __pmkit_ssapp_check_ptr);
 *   __pmkit_ssapp_begin();                    // in flight from here
 *   per RISE R: buoy word  R | t << 63  to frame word 0 (read and RMW
 *     RISEs first flip t in their flipper word and store it back after
 *     the buoy), the body, whose values that outlive the RISE go to frame
 *     slots, then a fence (or a compiler barrier);
 *   __pmkit_ssapp_exit();                     // before every return
 * Slots written by read, RMW or allocation RISEs hold 32 bits of value
 * and the RISE's torn bit in bit 63 (wider values take two slots); a slot
 * whose bits 32..62 are not zero is invalid. Recovery calls
 * `recover(frame, resume)`: resume is 2R to start RISE R again, 2R+1 to
 * continue after it (Table 3 of the SSAPP paper). */
#define PMKIT_SSAPP_TORN (1ull << 63)
#define PMKIT_SSAPP_INVALID (1ull << 62)
enum {
  PMKIT_RISE_READ = 1,  /* loads; skipped after a crash if its slots match */
  PMKIT_RISE_WRITE = 2, /* stores; always re-executed                      */
  PMKIT_RISE_CALL = 3,  /* one idempotent call; always re-executed         */
  PMKIT_RISE_ALLOC = 4, /* one pmkit_alloc: re-executed, same block        */
  PMKIT_RISE_RMW = 5,   /* one atomic RMW, last; skipped if it took effect */
};
struct __pmkit_ssapp_rise {
  uint32_t kind;  /* PMKIT_RISE_*                                        */
  uint32_t first; /* its torn-bit slots: slots[first .. first+nslots)    */
  uint32_t nslots;
  uint32_t line; /* source line, for messages (0: unknown)              */
};
struct __pmkit_ssapp_fase {
  uint64_t id;      /* 64-bit FNV-1a of the function's symbol name      */
  const char *name; /* the symbol name, for messages                    */
  void (*recover)(uint64_t *frame, uint64_t resume);
  uint32_t frame_bytes; /* the frame: buoy, flippers, slots, locals    */
  uint32_t nrises;      /* RISE R (1-based) is rises[R-1]              */
  const struct __pmkit_ssapp_rise *rises;
  const uint32_t *slots; /* torn-bit slots: byte offset | PMKIT_SSAPP_SLOT_* */
  uint32_t flags;        /* PMKIT_SSAPP_*                               */
  uint32_t nptrs;
  /* Slots that hold pointers: byte offset | PMKIT_SSAPP_SLOT_TORN when in
   * torn-bit form. Recovery moves those into the program's static data by
   * how far the program's base moved since the crashed run (frame word 1
   * records it at begin). */
  const uint32_t *ptrs;
};
/* A slot holding the checksum of the bytes __pmkit_ssapp_copy_in took
 * (low 32 bits) instead of a value. */
#define PMKIT_SSAPP_SLOT_SUM 1u
#define PMKIT_SSAPP_SLOT_TORN 2u
/* The module's RISEs end with a compiler barrier instead of a fence. */
#define PMKIT_SSAPP_COMPILER_FENCE 1u
/* Registers a module's FASEs (a constructor the pass adds). */
void __pmkit_ssapp_register(const struct __pmkit_ssapp_fase *t, uint32_t n);
/* The calling thread's frame for FASE id in the pool holding `anchor` (or
 * the only open pool), zeroed when first allocated and reused after. */
uint64_t *__pmkit_ssapp_enter(uint64_t id, const void *anchor);
/* A pointer argument: NULL or into a pool, or the program stops. */
void __pmkit_ssapp_check_ptr(const void *p, uint32_t argno);
/* The arguments are in the frame: the FASE is in flight. */
void __pmkit_ssapp_begin(void);
/* The FASE completed: one ordered store ends it. */
void __pmkit_ssapp_exit(void);
/* pmkit_alloc / pmkit_zalloc inside a FASE (an allocation RISE): the
 * pool is the FASE's; re-executed after a crash, it returns the block it
 * returned before. */
int __pmkit_ssapp_alloc(void *pool, uint64_t size, void **out, uint32_t zero);
/* pmkit_free inside a FASE: in the FASE's pool, applied when it commits. */
int __pmkit_ssapp_free(void *pool, void *p);
/* memmove(dst, src, n) inside a FASE, as two RISEs: a read RISE copies the
 * bytes to the thread's buffer and stores their checksum with the RISE's
 * torn bit t in *slot; a write RISE copies them out. At most 4 KiB. */
void __pmkit_ssapp_copy_in(const void *src, uint64_t n, uint64_t *slot,
                           uint64_t t);
void __pmkit_ssapp_copy_out(void *dst, uint64_t n);
/* An atomic read-modify-write of a 64-bit word inside a FASE (an RMW RISE,
 * alone): op PMKIT_SSAPP_RMW_CAS (v: the desired value) or another
 * operation with operand v. Returns the value it replaced (or found, for a
 * failed CAS), without its tag: the word keeps a tag naming this thread in
 * bits 48..63, so values must stay below 2^48, and every read of the word
 * masks them (the pass does so in FASEs; pmkit_ssapp_value elsewhere). */
enum {
  PMKIT_SSAPP_RMW_CAS = 1,
  PMKIT_SSAPP_RMW_XCHG,
  PMKIT_SSAPP_RMW_ADD,
  PMKIT_SSAPP_RMW_SUB,
  PMKIT_SSAPP_RMW_AND,
  PMKIT_SSAPP_RMW_OR,
  PMKIT_SSAPP_RMW_XOR,
};
uint64_t __pmkit_ssapp_rmw(uint64_t *word, uint32_t op, uint64_t v,
                           uint64_t expected);
/* PM locks inside a FASE (kind: PMKIT_SSAPP_LOCK_*), in the pool or in the
 * program's static data: the thread's held locks are recorded, so that
 * recovery holds them again before any interrupted FASE resumes; taking a
 * held lock again, or releasing one not held, does nothing (a re-executed
 * RISE). */
enum {
  PMKIT_SSAPP_LOCK_MUTEX = 1,
  PMKIT_SSAPP_LOCK_READ = 2,
  PMKIT_SSAPP_LOCK_WRITE = 3,
};
void __pmkit_ssapp_lock(void *lock, uint32_t kind);
void __pmkit_ssapp_unlock(void *lock, uint32_t kind);

/* ---- arp mode (include/pmkit/arp.hpp; the pmkit-arp pass) ---------------
 * pmkit::atomic calls these around its synchronisation accesses: a release
 * just before its store, an acquire just after its load (val: the value
 * stored or loaded, or 0; size: the atomic's size, 0 above 8 bytes), and a
 * sequence point where pmkit::sequence_point() stands. flags: PMKIT_SYNC_*
 * of trace_format.h. The pmkit-arp pass replaces each call with the fences
 * of the lowering it was asked for (and keeps the call when tracing).
 * Called without the pass, a persistent release or sequence point is an
 * sfence, so that flushes the program issued itself are ordered; a
 * volatile one and an acquire are nothing. libpmkit-trace also records
 * them as ACQUIRE, RELEASE and SEQPOINT events. They never throw, so C++
 * code calls them with a plain call, which the pass can remove. */
__attribute__((nothrow)) void __pmkit_arp_release(const void *addr,
                                                  uint64_t val, uint32_t size,
                                                  uint32_t flags);
__attribute__((nothrow)) void __pmkit_arp_acquire(const void *addr,
                                                  uint64_t val, uint32_t size,
                                                  uint32_t flags);
__attribute__((nothrow)) void __pmkit_arp_seqpoint(uint32_t flags);

/* Owners of the persistent words of a thread context (pmkit_ctx_ext). */
enum {
  PMKIT_EXT_CLOBBER = 0, /* words 0..3   */
  PMKIT_EXT_SSAPP = 4,   /* words 4..7   */
  PMKIT_EXT_ARP = 8,     /* words 8..11  */
  PMKIT_EXT_USER = 12,   /* words 12..15 */
};

/*
 * Version log
 *   1  first version: __pmkit_abi_version, pool bounding box,
 *      __pmkit_crash_point, context extension slots.
 *   2  __pmkit_trace_* calls of the pmkit-trace pass.
 *   3  __pmkit_flush_range for the pmkit-robust pass.
 *   4  __pmkit_flit_counters for the pmkit-robust pass's flit setting.
 *   5  __pmkit_clobber_* calls and the FASE table of the pmkit-clobber pass.
 *   6  __pmkit_clobber_log_batch (log entries sharing one fence) and
 *      __pmkit_clobber_wb (write-backs deferred to commit).
 *   7  __pmkit_ssapp_* calls, the RISE and FASE tables of the pmkit-ssapp
 *      pass and the frame's word layout.
 *   8  ssapp: __pmkit_ssapp_copy_in/_copy_out (memmove), __pmkit_ssapp_rmw
 *      (tagged atomic RMWs), pointer slots in the FASE table, locks in
 *      static data.
 *   9  __pmkit_arp_release/_acquire/_seqpoint (pmkit::atomic, arp mode).
 *  10  __pmkit_trace_call (CALL events); the pass records the buffers of
 *      read, recv, fread, clock_gettime, ... as writes after the call,
 *      reports every locked atomic on the stack or a global through
 *      __pmkit_trace_atomic_end with token -1, and registers every
 *      instrumented module with __pmkit_trace_locs.
 *  11  __pmkit_trace_enter/_leave/_depth (call stacks of trace events).
 */

#ifdef __cplusplus
}
#endif
#endif /* PMKIT_ABI_H */
