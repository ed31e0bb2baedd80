/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pmkit.h -- the public C API of libpmkit, the shared substrate of every pmkit
 * mode: persistent pools mapped at a fixed address, the persistence domain and
 * flush primitives, a crash-consistent allocator, persistent per-thread
 * contexts, PM-resident locks, and crash points. Every function that can fail
 * returns 0 (or a documented non-negative value) on success and a negative
 * PMKIT_E_* code on failure; pmkit_errormsg() then returns a one-line message
 * for the calling thread. Nothing in this library aborts on bad input.
 */
#ifndef PMKIT_PMKIT_H
#define PMKIT_PMKIT_H

#include <stddef.h>
#include <stdint.h>

#include "pmkit/annotations.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The functions marked PMKIT_NOTHROW neither throw nor call back into the
 * program, so a C++ caller needs no landing pad around them (and robust
 * mode's --strip-existing removes a plain call). pmkit_recover is not:
 * it re-executes the program's failure-atomic functions. */
#ifdef __cplusplus
#define PMKIT_NOTHROW __attribute__((__nothrow__))
#else
#define PMKIT_NOTHROW
#endif

/* ---- errors ------------------------------------------------------------ */

/* Failures are negative codes of their own range, -5001 to -5014 since
 * version 0.2 (they were -1 to -14, where they collided with -errno values:
 * -EBADF read as PMKIT_E_BUSY); pmkit_errno gives the closest errno. */
enum {
  PMKIT_OK = 0,
  PMKIT_E_INVAL = -5001,     /* bad argument (NULL, bad flag, bad pointer)    */
  PMKIT_E_NOENT = -5002,     /* pool file does not exist                      */
  PMKIT_E_EXIST = -5003,     /* pool file already exists (create)             */
  PMKIT_E_TRUNCATED = -5004, /* file shorter than its header says             */
  PMKIT_E_CORRUPT = -5005,   /* header checksum or metadata inconsistent      */
  PMKIT_E_FOREIGN = -5006,   /* not a pmkit pool, or another program's layout */
  PMKIT_E_VERSION = -5007,   /* pool made by an incompatible layout version   */
  PMKIT_E_TOOSMALL = -5008,  /* requested pool size below PMKIT_POOL_MIN_SIZE */
  PMKIT_E_BUSY = -5009, /* pool already open (by this or another process) */
  PMKIT_E_ADDRINUSE = -5010, /* the pool's fixed address range is occupied   */
  PMKIT_E_IO = -5011,        /* a system call failed (see the message)        */
  PMKIT_E_NOMEM = -5012,     /* pool heap exhausted                           */
  PMKIT_E_NOSPC = -5013, /* a fixed table is full (pools, threads, journal) */
  PMKIT_E_STATE = -5014, /* call not valid in the current state           */
};

/* The calling thread's message of its last failure. Every public function
 * that can fail clears it on entry, so after a failure it is that call's;
 * those that release (pmkit_pool_close, pmkit_ctx_release, pmkit_free)
 * leave it unless they fail themselves, so an error path may call them
 * before it reports. "" if none; never NULL. */
PMKIT_NOTHROW const char *pmkit_errormsg(void);
/* A short constant name for an error code, e.g. "PMKIT_E_BUSY". */
PMKIT_NOTHROW const char *pmkit_strerror(int err);
/* The errno value closest to a PMKIT_E_* code (PMKIT_E_BUSY: EBUSY,
 * PMKIT_E_CORRUPT: EUCLEAN, ...); 0 for PMKIT_OK or a non-negative value,
 * EINVAL for a value that is no PMKIT_E_* code. */
PMKIT_NOTHROW int pmkit_errno(int err);

/* ---- pools --------------------------------------------------------------- */

#define PMKIT_LAYOUT_VERSION 4u
#define PMKIT_POOL_MIN_SIZE (2u << 20) /* 2 MiB */
#define PMKIT_LAYOUT_MAX 48            /* bytes of a layout name, with NUL */

typedef struct pmkit_pool pmkit_pool;

typedef struct pmkit_pool_opts {
  const char *layout; /* program's layout name; NULL or "" accepts any      */
  uintptr_t base;     /* fixed mapping address; 0 picks a free one (create) */
  unsigned flags;     /* PMKIT_POOL_* below                                  */
} pmkit_pool_opts;

/* Open read-only-ish for inspection: do not bump the run generation or run
 * allocator recovery writes (used by `pmkit pool info`). */
#define PMKIT_POOL_INSPECT 0x1u
/* Before using the pool, also run the full check (pmkit_pool_check_report,
 * time proportional to the reachable heap) and refuse it with
 * PMKIT_E_CORRUPT if the check fails or finds suspects: reachable words
 * pointing into free blocks. A lost allocation bit of a live block is
 * invisible to open's bounded validation and is caught only this way. With
 * PMKIT_POOL_VERIFY_OFFSETS, words holding pool offsets are followed too
 * (PMKIT_GC_OFFSETS). The environment variable PMKIT_POOL_VERIFY=1 (or
 * =offsets) adds these flags to every open of the process; 0 or empty adds
 * nothing (it never removes a flag the program passes), and any other value
 * is taken as 1, with a warning. */
#define PMKIT_POOL_VERIFY 0x2u
#define PMKIT_POOL_VERIFY_OFFSETS 0x4u

/* Create a new pool file of `size` bytes (rounded up to 64 KiB) at `path` and
 * map it. Fails with PMKIT_E_EXIST if the file exists, PMKIT_E_TOOSMALL below
 * PMKIT_POOL_MIN_SIZE. The file appears at `path` only once fully initialised.
 * `opts` may be NULL. */
PMKIT_NOTHROW int pmkit_pool_create(const char *path, size_t size,
                                    const pmkit_pool_opts *opts,
                                    pmkit_pool **out);

/* Open an existing pool at the address recorded in its header. Validates the
 * header (magic, version, checksum, size, layout), the state page, the chunk
 * table, the chunk headers and the allocator journals, in time proportional
 * to the chunk table (PMKIT_POOL_VERIFY adds the full check), and takes an
 * exclusive flock: a pool is open at most once at a time. Bumps the run
 * generation, so PM locks held by a crashed run are released, and finishes
 * allocator journals left by a crash. A refused pool is left unchanged. */
PMKIT_NOTHROW int pmkit_pool_open(const char *path, const pmkit_pool_opts *opts,
                                  pmkit_pool **out);

/* Unmap and unlock. Other threads must have stopped using the pool. */
PMKIT_NOTHROW int pmkit_pool_close(pmkit_pool *pool);

/* Base address, usable size in bytes, and run generation of an open pool. */
PMKIT_NOTHROW void *pmkit_pool_base(const pmkit_pool *pool);
PMKIT_NOTHROW size_t pmkit_pool_size(const pmkit_pool *pool);
PMKIT_NOTHROW uint64_t pmkit_pool_generation(const pmkit_pool *pool);

/* 1 if addr lies inside any open pool, else 0. A few loads: see also the
 * inline bounding-box test in pmkit/abi.h used by instrumentation. */
PMKIT_NOTHROW int pmkit_in_pool(const void *addr);
/* The open pool containing addr, or NULL. */
PMKIT_NOTHROW pmkit_pool *pmkit_pool_of(const void *addr);

/* The root object: allocated zeroed on first call with `size` bytes, the same
 * object afterwards. PMKIT_E_INVAL if an existing root is smaller than size.
 * Creating the root is failure-atomic. */
PMKIT_NOTHROW int pmkit_root(pmkit_pool *pool, size_t size, void **out);

/* Pool offset <-> pointer, for programs that store offsets. */
PMKIT_NOTHROW uint64_t pmkit_off(const pmkit_pool *pool, const void *p);
PMKIT_NOTHROW void *pmkit_ptr(const pmkit_pool *pool, uint64_t off);

typedef struct pmkit_pool_info {
  uint32_t layout_version;
  uint8_t uuid[16];
  char layout[PMKIT_LAYOUT_MAX];
  uint64_t base, size, generation;
  uint64_t heap_off, chunk_size, nchunks;
  uint64_t chunks_free, chunks_small, chunks_large;
  uint64_t blocks_used, bytes_used; /* live allocations (usable bytes)  */
  uint64_t root_off, root_size;
  uint32_t nthreads, threads_busy; /* context slots, slots with work   */
} pmkit_pool_info;

/* Fill `info` with statistics from the pool's persistent metadata. */
PMKIT_NOTHROW int pmkit_pool_stat(pmkit_pool *pool, pmkit_pool_info *info);

/* Walk all persistent metadata and validate it (header, chunk table, bitmaps,
 * context slots and their journals). Returns 0 if consistent, else
 * PMKIT_E_CORRUPT with the first problem in pmkit_errormsg(). */
PMKIT_NOTHROW int pmkit_pool_check(pmkit_pool *pool);

/* What pmkit_pool_check_report finds beyond pass or fail. */
typedef struct pmkit_check_report {
  /* Free chunk-table entries inside large runs: what a crash during a large
   * allocation or free leaves; the next writable open completes them. */
  uint64_t run_gaps;
  /* Reachable words (from the root object and the context extension words,
   * followed as pmkit_pool_gc follows them) holding the address of the
   * start of a free block, or of a free chunk. A lost allocation bit looks
   * like this, and so does a stale pointer the program keeps to a block it
   * freed: suspects, not proof. The first: where it points and the block
   * holding it (pool offsets; 0 for a context slot). */
  uint64_t suspects;
  uint64_t suspect_off, suspect_from;
} pmkit_check_report;

/* pmkit_pool_check, and then (if it passes) a walk of every block the root
 * and the contexts reach, which fills `report`; with PMKIT_GC_OFFSETS (see
 * pmkit_pool_gc), words holding pool offsets are followed and counted too.
 * Time proportional to the reachable heap. */
PMKIT_NOTHROW int pmkit_pool_check_report(pmkit_pool *pool, unsigned flags,
                                          pmkit_check_report *report);

typedef struct pmkit_gc_stats {
  uint64_t blocks_live, blocks_freed, bytes_freed;
  /* Reachable words pointing into free blocks or free chunks, as
   * pmkit_check_report counts them. gc follows the free blocks' contents
   * (what a block with a lost allocation bit points to stays allocated)
   * but leaves those blocks free. */
  uint64_t suspects;
} pmkit_gc_stats;

/* Also treat words that look like pool offsets as references. */
#define PMKIT_GC_OFFSETS 0x1u

/* Reclaim every block not reachable from the root object or a thread
 * context. Reachability is conservative: any aligned 8-byte word in a
 * reachable block that holds an address inside a live block (interior
 * pointers included) keeps that block alive; with PMKIT_GC_OFFSETS, so does
 * a word holding a pool offset inside one. The pool must not be in use by
 * other threads. `stats` may be NULL. */
PMKIT_NOTHROW int pmkit_pool_gc(pmkit_pool *pool, unsigned flags,
                                pmkit_gc_stats *stats);

typedef struct pmkit_repair_stats {
  uint64_t blocks_kept;     /* reachable blocks, allocated afterwards      */
  uint64_t blocks_freed;    /* allocated, unreachable: freed               */
  uint64_t bytes_freed;     /* their usable bytes                          */
  uint64_t blocks_restored; /* reachable but marked free: allocated again  */
  uint64_t table_fixed;     /* chunk table entries rewritten               */
  uint64_t headers_fixed;   /* chunk headers rewritten                     */
  uint64_t state_fixed;     /* state page words rewritten                  */
  uint64_t contexts_fixed;  /* context slots reset to idle                 */
  uint64_t bytes_cut;       /* bytes after the pool's end, cut off         */
} pmkit_repair_stats;

/* Do not write: report what a repair would change. */
#define PMKIT_REPAIR_DRY_RUN 0x1u

/* Rebuild the allocator metadata of the pool file at `path` (not open
 * anywhere) from the blocks reachable from its root object and context
 * extension words, as pmkit_pool_gc reaches them (pointers and offsets):
 * chunk table entries lost or altered are restored from the chunk headers,
 * reachable blocks are marked allocated and the others freed, the state page
 * and context slots are reset where invalid, and bytes after the pool's end
 * are cut off. Refuses, changing nothing, when the root cannot be trusted
 * (its fields fail their check word or it is not a block) or a
 * failure-atomic section is in flight. A crash during a repair can leave
 * the pool inconsistent: keep a copy (`pmkit pool check --repair` writes
 * one). `note` (may be NULL) gets one line per change; `stats` may be NULL.
 * With PMKIT_REPAIR_DRY_RUN the file is mapped privately and nothing
 * written. */
PMKIT_NOTHROW int pmkit_pool_repair(const char *path, unsigned flags,
                                    void (*note)(void *arg, const char *line),
                                    void *arg, pmkit_repair_stats *stats);

/* ---- persistence domain and flushes ------------------------------------ */

typedef enum { PMKIT_DOMAIN_ADR = 0, PMKIT_DOMAIN_EADR = 1 } pmkit_domain_t;
typedef enum {
  PMKIT_FLUSH_NONE = 0,
  PMKIT_FLUSH_CLFLUSH = 1,
  PMKIT_FLUSH_CLFLUSHOPT = 2,
  PMKIT_FLUSH_CLWB = 3,
} pmkit_flush_t;

/* The domain in effect: PMKIT_DOMAIN (adr|eadr) from the environment, ADR by
 * default; builds with -DPMKIT_FORCE_EADR report EADR whatever the
 * environment says (see pmkit_flush below). */
PMKIT_NOTHROW pmkit_domain_t pmkit_domain(void);
/* The flush instruction in use: the best the CPU offers (clwb > clflushopt >
 * clflush) unless PMKIT_FLUSH names another; NONE under eADR. */
PMKIT_NOTHROW pmkit_flush_t pmkit_flush_kind(void);
PMKIT_NOTHROW const char *pmkit_flush_name(pmkit_flush_t k);

/* Write back the cache lines covering [addr, addr+len). No-op under eADR. */
PMKIT_NOTHROW void pmkit_flush(const void *addr, size_t len);
/* Order: every earlier flush completes before any later store persists.
 * Under eADR only a compiler barrier. A crash point (see below). */
PMKIT_NOTHROW void pmkit_fence(void);
/* pmkit_flush + pmkit_fence. */
PMKIT_NOTHROW void pmkit_persist(const void *addr, size_t len);

/* ---- allocator ------------------------------------------------------------
 */

#define PMKIT_ALLOC_MAX_SMALL 8192u /* larger requests take whole chunks */

/* Allocate `size` bytes (16-byte aligned; 64 for large) from the pool's heap.
 * The allocation is durable (survives a crash) from the caller's next fence:
 * publish the block only after a fence, as its contents require anyway.
 * Inside a failure-atomic section (pmkit_fase_begin) allocations are
 * journaled and replay-deterministic. Returns PMKIT_E_NOMEM when full. */
PMKIT_NOTHROW int pmkit_alloc(pmkit_pool *pool, size_t size, void **out);
/* As pmkit_alloc, with the contents zeroed; the zeros and the allocation
 * are durable (flushed and fenced) when it returns, so the block may be
 * published at once. */
PMKIT_NOTHROW int pmkit_zalloc(pmkit_pool *pool, size_t size, void **out);
/* Release a block. The caller must durably unpublish it first (store, flush,
 * fence). Detects pointers that are not live blocks (PMKIT_E_INVAL) such as
 * double frees. Inside a failure-atomic section the free is deferred until
 * the section commits. NULL is accepted and ignored. */
PMKIT_NOTHROW int pmkit_free(pmkit_pool *pool, void *p);
/* Usable size of a live block, 0 for anything else. */
PMKIT_NOTHROW size_t pmkit_usable_size(pmkit_pool *pool, const void *p);

/* ---- persistent thread contexts ----------------------------------------- */

/* Context slots per pool; allocations (journal entries) and frees per
 * failure-atomic section; persistent extension words per slot. */
#define PMKIT_MAX_THREADS 64u
#define PMKIT_JOURNAL_MAX 54u
#define PMKIT_FASE_FREES_MAX 96u
#define PMKIT_CTX_EXT_WORDS 16u

typedef struct pmkit_ctx pmkit_ctx;

typedef enum {
  PMKIT_CTX_IDLE = 0,   /* no failure-atomic section in flight            */
  PMKIT_CTX_ACTIVE = 1, /* a section began and did not commit: recover it */
} pmkit_ctx_state;

/* The calling thread's context slot in `pool`: claimed on first call (the
 * lowest slot not claimed in this run and with no work in flight), the same
 * slot for the rest of the thread's life. Slot ids are stable across runs:
 * what a slot holds persists. PMKIT_E_NOSPC when all slots are claimed. */
PMKIT_NOTHROW int pmkit_ctx_get(pmkit_pool *pool, pmkit_ctx **out);
/* Claim slot `id` for the calling thread, e.g. to recover its work.
 * PMKIT_E_BUSY if another thread of this run holds it. Release with
 * pmkit_ctx_release. */
PMKIT_NOTHROW int pmkit_ctx_adopt(pmkit_pool *pool, unsigned id,
                                  pmkit_ctx **out);
/* Give a claimed slot back (called automatically at thread exit). */
PMKIT_NOTHROW int pmkit_ctx_release(pmkit_ctx *ctx);
PMKIT_NOTHROW unsigned pmkit_ctx_id(const pmkit_ctx *ctx);
PMKIT_NOTHROW pmkit_ctx_state pmkit_ctx_state_of(const pmkit_ctx *ctx);
/* Slot `id` state without claiming it: for recovery to enumerate work. */
PMKIT_NOTHROW int pmkit_ctx_peek(pmkit_pool *pool, unsigned id,
                                 pmkit_ctx_state *state);
/* PMKIT_CTX_EXT_WORDS persistent words a runtime may own (index by the
 * PMKIT_EXT_* slot of include/pmkit/abi.h). Pool-relative offsets stored here
 * are treated as roots by pmkit_pool_gc. */
PMKIT_NOTHROW uint64_t *pmkit_ctx_ext(pmkit_ctx *ctx);

/* Failure-atomic sections (for runtimes, not applications): the allocation
 * journal. Between begin and commit, pmkit_alloc/pmkit_free on the same
 * thread are journaled: frees are deferred to commit; after a crash, a
 * section re-executed under pmkit_fase_replay gets exactly the blocks the
 * interrupted execution got, in the same order. */
PMKIT_NOTHROW int pmkit_fase_begin(pmkit_ctx *ctx, uint64_t tag);
/* Start re-executing the interrupted section of an ACTIVE slot. */
PMKIT_NOTHROW int pmkit_fase_replay(pmkit_ctx *ctx);
/* Commit: one ordered store makes the section done, then deferred frees are
 * applied (a crash before they are durable leaks their blocks). */
PMKIT_NOTHROW int pmkit_fase_commit(pmkit_ctx *ctx);
/* Give up the section of an ACTIVE slot: its journaled allocations are
 * released, its deferred frees dropped, and the slot becomes IDLE. For
 * runtimes that roll a section back instead of re-executing it. */
PMKIT_NOTHROW int pmkit_fase_abort(pmkit_ctx *ctx);
/* The tag passed to pmkit_fase_begin of the section in flight. */
PMKIT_NOTHROW uint64_t pmkit_fase_tag(const pmkit_ctx *ctx);

/* ---- recovery, clobber and ssapp modes (runtime/clobber, runtime/ssapp) --
 * Recover the failure-atomic sections a crash interrupted in `pool`.
 * ssapp mode resumes each interrupted FASE where the crash left it, one
 * thread per FASE (each holding again the PM locks it held); then clobber
 * mode, one slot at a time on the calling thread, restores the inputs
 * each FASE overwrote and re-executes it with its logged arguments (undo
 * builds roll it back instead). Call it after opening the pool and after
 * re-creating any volatile state the FASEs read (locks, configuration),
 * before other threads start FASEs. A crash during recovery is recovered by
 * the next call. Returns the number of sections recovered (>= 0), or a
 * negative PMKIT_E_* (e.g. PMKIT_E_STATE: a FASE in flight that this
 * program does not contain); slots owned by other runtimes are left. */
int pmkit_recover(pmkit_pool *pool);

/* Work of clobber-mode FASEs in this process since it started, all threads
 * (recovery included). Fences count sfences issued between a FASE's begin
 * and its commit, inclusive (0 under eADR). */
typedef struct pmkit_clobber_stats {
  uint64_t fases;      /* committed                                       */
  uint64_t entries;    /* clobber (or undo) log entries                   */
  uint64_t log_bytes;  /* bytes of those entries, headers included        */
  uint64_t vlog_bytes; /* bytes of argument records                       */
  uint64_t fences;
  uint64_t replays;   /* FASEs re-executed by recovery                    */
  uint64_t rollbacks; /* logs rolled back by recovery                     */
} pmkit_clobber_stats;
PMKIT_NOTHROW int pmkit_clobber_stats_get(pmkit_clobber_stats *out);

/* The clobber-mode FASE a crash left in flight in context slot `slot` of
 * `pool`, looked at before pmkit_recover handles it: a checker can then
 * confirm that recovery completes exactly the calls that had begun.
 * Arguments are as recovery passes them (pool pointers as addresses), with
 * declared volatile buffers as NULL; under the undo setting there is no
 * vlog and nargs is 0. A slot whose begin a crash tore (the FASE never
 * began) is reset to IDLE, as pmkit_recover would. Returns 1 and fills
 * *out if a FASE is in flight there, 0 if none, or a negative PMKIT_E_*. */
typedef struct pmkit_clobber_inflight {
  uint64_t id;      /* the FASE's id                                      */
  const char *name; /* its name, or NULL if this program does not have it */
  int undo;         /* the undo setting: recovery rolls the call back     */
  unsigned nargs;
  uint64_t args[32];
} pmkit_clobber_inflight;
PMKIT_NOTHROW int pmkit_clobber_inflight_get(pmkit_pool *pool, unsigned slot,
                                             pmkit_clobber_inflight *out);

/* ---- ssapp mode: words that FASEs update with atomic RMWs -----------------
 * A FASE compiled in ssapp mode tags every 64-bit word it updates with an
 * atomic read-modify-write (compare-exchange, exchange, add, ...) in bits
 * 48..63, so that recovery can tell whether the RMW took effect. Reads in
 * those FASEs drop the tag; code outside them reads such a word with these
 * (pointers and integers below 2^48 are unchanged by them). */
static inline uint64_t pmkit_ssapp_value(uint64_t word) {
  return word & ((1ull << 48) - 1);
}
static inline void *pmkit_ssapp_ptr(const void *word) {
  return (void *)((uintptr_t)word & ((1ull << 48) - 1));
}

/* ---- PM-resident locks ----------------------------------------------------
 * Place these in the pool. Zero-initialised memory is an unlocked lock. A
 * lock held when a run crashed is free in the next run: its generation no
 * longer matches the pool's. They work in DRAM too (no reset needed). */

typedef struct __attribute__((aligned(8))) pmkit_mutex {
  uint32_t state; /* 0 free, 1 locked, 2 locked with waiters */
  uint32_t gen;   /* low 32 bits of the run generation that used it */
} pmkit_mutex;
typedef struct __attribute__((aligned(8))) pmkit_rwlock {
  uint32_t state; /* readers count, or PMKIT_RW_WRITER */
  uint32_t gen;
} pmkit_rwlock;

PMKIT_NOTHROW void pmkit_mutex_lock(pmkit_mutex *m);
/* 0, or PMKIT_E_BUSY with no message (a held lock is no failure to
 * explain, and a spin loop must not format one). */
PMKIT_NOTHROW int pmkit_mutex_trylock(pmkit_mutex *m);
PMKIT_NOTHROW void pmkit_mutex_unlock(pmkit_mutex *m);
PMKIT_NOTHROW void pmkit_rwlock_rdlock(pmkit_rwlock *l);
PMKIT_NOTHROW void pmkit_rwlock_wrlock(pmkit_rwlock *l);
PMKIT_NOTHROW void pmkit_rwlock_unlock(pmkit_rwlock *l);

/* ---- crash points -------------------------------------------------------
 * Crash points are places where a runtime lets an emulated power failure
 * happen: every pmkit_fence, before every persistent store of the
 * allocator and contexts, on return from pmkit_alloc and pmkit_free (so the
 * caller's stores after them are separable from the allocation), and
 * points later runtimes document. With PMKIT_CRASH_AT=N the
 * N-th crash point of the process (counting from 1, all threads) ends it at
 * once with _exit(PMKIT_CRASH_EXIT), leaving PM as an eADR platform would.
 * With PMKIT_CRASH_SEED=S each point crashes with probability
 * 1/PMKIT_CRASH_EVERY (default 1000), drawn from a generator seeded by S.
 * PMKIT_CRASH_REPORT=FILE writes the number of points passed at exit. */

#define PMKIT_CRASH_EXIT 86 /* exit status of an emulated power failure */

/* Count one crash point; may not return. */
PMKIT_NOTHROW void pmkit_crash_point(void);
/* Crash points passed so far in this process. */
PMKIT_NOTHROW uint64_t pmkit_crash_count(void);

/* ---- tracing and crash-state exploration ---------------------------------
 * A program built with `pmkit cc --trace` and linked with libpmkit-trace
 * records its PM writes, flushes and fences to the file named by
 * PMKIT_TRACE; `pmkit explore` reads it (docs/explorer.md). In a program
 * linked with plain libpmkit these calls do nothing. */

/* Mark the start / end of a named operation (e.g. "put"). The explorer
 * names crash points by the operation they interrupt and can restrict
 * exploration to one (--mark NAME). `name` is copied; marks may nest. */
PMKIT_NOTHROW void pmkit_mark_begin(const char *name);
PMKIT_NOTHROW void pmkit_mark_end(const char *name);
/* 1 if this process is recording a trace, else 0. */
PMKIT_NOTHROW int pmkit_tracing(void);

/* Register a pool image already mapped at its base address (the explorer's
 * in-process checker maps each crash image this way). Validates the header
 * like pmkit_pool_open, then recovers as open does (new run generation,
 * allocator journals finished). pmkit_pool_close unregisters it and leaves
 * the mapping alone. */
PMKIT_NOTHROW int pmkit_pool_attach(void *base, pmkit_pool **out);

/* The entry point an in-process checker library exports (`pmkit explore
 * --check-lib LIB`): called in a fresh child process with the crash image
 * mapped at its base address; return 0 if the image is consistent. */
typedef int (*pmkit_check_fn)(void *pool_base);

#ifdef __cplusplus
}
#endif
#endif /* PMKIT_PMKIT_H */
