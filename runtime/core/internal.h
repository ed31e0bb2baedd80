/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h -- the persistent layout of a pmkit pool and the volatile state
 * libpmkit keeps beside it, shared by the files of runtime/core. Everything
 * here has hidden visibility (pmk_ prefix); the public surface is
 * include/pmkit/pmkit.h.
 *
 * Pool layout (offsets from the fixed base address):
 *   [0, 4K)          pmk_hdr: immutable after create, checksummed
 *   [4K, 8K)         pmk_state: mutable words, each updated by one 8-byte store
 *   [8K, ...)        PMKIT_MAX_THREADS context slots of PMK_CTX_SIZE bytes
 *   table_off        chunk table: one uint32_t per chunk (the allocator's
 *                    commit point for chunks)
 *   heap_off         chunks of PMK_CHUNK bytes, 64 KiB aligned
 * A small-class chunk starts with a pmk_chunk header whose bitmap has one bit
 * per block (1 = allocated); a large allocation is a run of chunks whose
 * first table entry is PMK_T_HEAD | length.
 */
#ifndef PMKIT_CORE_INTERNAL_H
#define PMKIT_CORE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

#include "pmkit/abi.h"
#include "pmkit/pmkit.h"

#define PMK_HIDDEN __attribute__((visibility("hidden")))
#define PMK_LIKELY(x) __builtin_expect(!!(x), 1)
#define PMK_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define PMK_MAGIC "PMKPOOL" /* 8 bytes with the NUL */
#define PMK_MAX_POOLS 16u   /* open at once in one process */
#define PMK_HDR_SIZE 4096u
#define PMK_STATE_OFF 4096u
#define PMK_CTX_OFF 8192u
#define PMK_CTX_SIZE 1024u
#define PMK_CHUNK (64u << 10)
#define PMK_CHUNK_SHIFT 16
#define PMK_CHUNK_HDR 1024u /* small chunk: header + bitmap, then blocks */
#define PMK_LARGE_HDR 64u   /* large run: header, then the block */
#define PMK_BITMAP_WORDS ((PMK_CHUNK_HDR - 64u) / 8u)
#define PMK_NCLASS 32u

/* Chunk table entries. */
#define PMK_T_FREE 0u
#define PMK_T_HEAD 0x80000000u /* | run length in chunks */
#define PMK_T_CONT 0x40000000u
#define PMK_T_LEN_MASK 0x3fffffffu
/* 1..PMK_NCLASS: a small chunk of class (entry - 1). */

struct pmk_hdr {
  char magic[8];
  uint32_t layout_version;
  uint32_t hdr_size;
  uint64_t size;
  uint64_t base;
  uint8_t uuid[16];
  char layout[PMKIT_LAYOUT_MAX];
  uint64_t ctx_off;
  uint32_t nctx, ctx_size;
  uint64_t table_off;
  uint64_t heap_off;
  uint64_t nchunks;
  uint64_t chunk_size;
  uint64_t created_ns;
  uint64_t checksum; /* FNV-1a 64 over the bytes before this field */
};

/* Run generations are 1 (create) and up, one per open: one that cannot be
 * bumped below this bound (no pool is opened 2^62 times) is corrupt, and
 * bumping it could wrap to 0. */
#define PMK_GEN_LIMIT (1ull << 62)
static inline int pmk_gen_ok(uint64_t gen) {
  return gen != 0 && gen + 1 < PMK_GEN_LIMIT; /* and one more open */
}

struct pmk_state {
  uint64_t run_gen;    /* bumped by every open; PM locks compare it */
  uint64_t root_off;   /* 0 = no root yet */
  uint64_t root_size;  /* bytes the root was created with */
  uint64_t root_check; /* pmk_root_word(root_off, root_size) */
};
/* The check word of the root fields. pmkit_root writes the size, the offset
 * and then this word, each fenced, so a crash can leave the word of no root
 * (pmk_root_word(0, 0)) beside a new root, which open completes; any other
 * mismatch (a zeroed or altered offset or size) is corruption. Never 0. */
static inline uint64_t pmk_root_word(uint64_t off, uint64_t size) {
  uint64_t h = (off ^ 0x6a09e667f3bcc908ull) * 0x9e3779b97f4a7c15ull ^ size;
  h = (h ^ h >> 31) * 0xbf58476d1ce4e5b9ull;
  return (h ^ h >> 29) | 1;
}

/* Context slot states (persistent). Layout version 2 also had a
 * committing state (2); it reads as corrupt now. */
#define PMK_CTX_IDLE 0u
#define PMK_CTX_ACTIVE 1u

/* Journal entry: pool offset of the block, bits 48..62 the chunk count of a
 * large block (0 for small). */
#define PMK_J_LEN_SHIFT 48
#define PMK_J_OFF_MASK ((1ull << 48) - 1)

/* An allocation journaled by a section: the entry and its check, in one
 * 16-byte pair (so in one cache line, written back together). */
struct pmk_jent {
  uint64_t e;
  uint64_t check; /* pmk_journal_check(e, index, seq); 0: retired */
};

struct pmk_ctx_pm {
  uint64_t state;
  uint64_t tag;
  uint64_t seq;      /* sections begun in this slot, ever */
  uint64_t reserved; /* 0 (version 2's journal count) */
  uint64_t ext[PMKIT_CTX_EXT_WORDS];
  /* Slots are PMK_CTX_SIZE apart, as the header says, so each starts a
   * cache line: state, tag, seq and the first four extension words share
   * one line, written back together. The journal has no count: its entries
   * are the leading ones whose check matches the section's number (layout
   * version 3), so an append needs one fence and stale entries of earlier
   * sections never count. */
  struct pmk_jent journal[PMKIT_JOURNAL_MAX];
};
_Static_assert(sizeof(struct pmk_ctx_pm) == PMK_CTX_SIZE, "context slot");

/* A slot's state word: PMK_CTX_* in the low byte. ACTIVE carries in the
 * rest a check of the tag and number begin wrote with it, so that begin
 * needs one fence: a crash that persisted the word without them leaves a
 * check that fails, and the slot reads as IDLE (the section never began:
 * none of its writes can persist before that fence). */
static inline uint64_t pmk_active_word(uint64_t tag, uint64_t seq) {
  uint64_t h = (tag ^ 0x5bd1e9955bd1e995ull) * 0x9e3779b97f4a7c15ull ^ seq;
  h = (h ^ h >> 32) * 0xd6e8feb86659fd93ull;
  return (h ^ h >> 32) << 8 | PMK_CTX_ACTIVE;
}
/* PMK_CTX_IDLE or _ACTIVE (or a corrupt word's value). */
static inline uint64_t pmk_ctx_state(const struct pmk_ctx_pm *c) {
  uint64_t s = c->state;
  if ((s & 0xff) != PMK_CTX_ACTIVE)
    return s;
  return s == pmk_active_word(c->tag, c->seq) ? PMK_CTX_ACTIVE : PMK_CTX_IDLE;
}
/* The check of journal entry e at index i of section seq; never 0. A crash
 * that persisted one word of the pair and not the other, or an entry left
 * by an earlier section, fails it. */
static inline uint64_t pmk_journal_check(uint64_t e, uint64_t i, uint64_t seq) {
  uint64_t h = (e ^ 0x2545f4914f6cdd1dull) * 0x9e3779b97f4a7c15ull ^
               (seq * PMKIT_JOURNAL_MAX + i);
  h = (h ^ h >> 29) * 0xbf58476d1ce4e5b9ull;
  return (h ^ h >> 32) | 1;
}
_Static_assert(PMK_CTX_OFF % 64 == 0 && PMK_CTX_SIZE % 64 == 0,
               "context slots start cache lines");

struct pmk_chunk {
  uint32_t cls; /* PMK_T_* copy or class+1, informational */
  uint32_t nblocks;
  uint64_t pad[7];
  uint64_t bitmap[PMK_BITMAP_WORDS];
};
_Static_assert(sizeof(struct pmk_chunk) == PMK_CHUNK_HDR, "chunk header");

/* Volatile per-chunk state (small chunks). */
enum { PMK_CS_NONE = 0, PMK_CS_OWNED, PMK_CS_DETACHED, PMK_CS_LISTED };

struct pmk_list {
  pthread_mutex_t lock;
  uint32_t *ids;
  uint32_t n, cap;
};

struct pmkit_ctx {
  struct pmkit_pool *pool;
  struct pmk_ctx_pm *pm;
  unsigned id;
};

struct pmkit_pool {
  int fd;
  unsigned id;     /* index in the registry */
  uint64_t serial; /* distinguishes reopenings for thread caches */
  unsigned flags;
  char *path;
  uintptr_t base;
  size_t size;
  struct pmk_hdr *hdr;
  struct pmk_state *st;
  uint32_t *table;
  uintptr_t heap;
  uint32_t nchunks;
  uint64_t gen;
  struct pmk_ctx_pm *ctxs;
  struct pmkit_ctx ctx[PMKIT_MAX_THREADS];
  _Atomic int claimed[PMKIT_MAX_THREADS];

  pthread_mutex_t chunk_lock; /* free chunk map and large runs */
  uint64_t *freemap;          /* 1 = chunk free (volatile mirror) */
  uint32_t rover;
  _Atomic uint8_t *cstate;
  struct pmk_list partial[PMK_NCLASS];
  pthread_mutex_t root_lock;
};

/* pmkit_pool.flags bits beyond the public PMKIT_POOL_* ones. */
#define PMK_POOL_ATTACHED 0x100u /* pmkit_pool_attach: not ours to unmap */

/* Tracing hooks (runtime/trace), called once a pool is registered and mapped
 * and before it is unregistered; nothing in a library built without it. */
#ifdef PMKIT_TRACED
PMK_HIDDEN void pmk_trace_pool_open(pmkit_pool *p);
PMK_HIDDEN void pmk_trace_pool_close(pmkit_pool *p);
/* An ACQUIRE, RELEASE or SEQPOINT event (runtime/arp). */
PMK_HIDDEN void pmk_trace_sync(uint8_t kind, const void *addr, uint64_t val,
                               uint32_t size, uint32_t flags);
#else
static inline void pmk_trace_pool_open(pmkit_pool *p) { (void)p; }
static inline void pmk_trace_pool_close(pmkit_pool *p) { (void)p; }
static inline void pmk_trace_sync(uint8_t kind, const void *addr, uint64_t val,
                                  uint32_t size, uint32_t flags) {
  (void)kind, (void)addr, (void)val, (void)size, (void)flags;
}
#endif

/* error.c */
PMK_HIDDEN int pmk_err(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Replace the message with pre + sep + the message + post (a path and ": "
 * to name the pool, say), returning code. */
PMK_HIDDEN int pmk_err_wrap(int code, const char *pre, const char *sep,
                            const char *post);
PMK_HIDDEN void pmk_clear_err(void);

/* flush.c */
PMK_HIDDEN void pmk_init(void);
PMK_HIDDEN extern int pmk_eadr;
PMK_HIDDEN void pmk_flush_line(const void *p);
/* pmkit_fence without the crash point, for the runtime's own ordering. */
PMK_HIDDEN void pmk_fence(void);
/* The process runs on an eADR platform whatever PMKIT_DOMAIN says (a module
 * built for eADR, e.g. clobber mode's -pmkit-clobber-domain=eadr, says so):
 * no write-backs, fences only order the compiler. */
PMK_HIDDEN void pmk_use_eadr(void);
/* sfences issued by the calling thread (ADR only), for per-FASE counts. */
PMK_HIDDEN extern __thread uint64_t pmk_sfences;

/* crash.c. pmk_crash_armed: fence points count (pmk_crash_point);
 * pmk_crash_stores: every PM store is a point (PMKIT_CRASH_POINTS=stores or
 * all), ticked by runtime/trace's hooks. */
PMK_HIDDEN extern int pmk_crash_armed;
PMK_HIDDEN extern int pmk_crash_stores;
PMK_HIDDEN void pmk_crash_tick(void);
/* Store points were asked for and cannot be counted: message, exit 2. */
PMK_HIDDEN _Noreturn void pmk_crash_need_stores(void);
static inline void pmk_crash_point(void) {
  if (PMK_UNLIKELY(pmk_crash_armed))
    pmk_crash_tick();
}

/* pool.c */
PMK_HIDDEN uint64_t pmk_fnv1a(const void *p, size_t n);
PMK_HIDDEN uint64_t pmk_next_serial(void);
/* The open pool in registry slot id if its serial is still `serial`. */
PMK_HIDDEN pmkit_pool *pmk_reg_lookup(unsigned id, uint64_t serial);
/* The open pool if exactly one is open, else NULL. */
PMK_HIDDEN pmkit_pool *pmk_only_pool(void);

/* ctx.c: the FASE tables of the failure-atomic runtimes (clobber, ssapp),
 * filled by the constructors their passes add. Their entries all begin
 * with the FASE's id and name. An entry is written before `n` admits it,
 * so lookups need no lock. */
#define PMK_MAX_FASES 1024u
struct pmk_fase_head {
  uint64_t id;
  const char *name;
};
struct pmk_registry {
  pthread_mutex_t lock;
  _Atomic uint32_t n;
  const struct pmk_fase_head *fase[PMK_MAX_FASES];
};
#define PMK_REGISTRY_INIT                                                      \
  {                                                                            \
    PTHREAD_MUTEX_INITIALIZER, 0, { 0 }                                        \
  }
/* Add n entries of `stride` bytes from t; two FASEs with one id, or too
 * many, stop the program with a message naming `mode`. */
PMK_HIDDEN void pmk_registry_add(struct pmk_registry *r, const void *t,
                                 size_t stride, uint32_t n, const char *mode);
/* The entry with this id, or NULL. */
PMK_HIDDEN const void *pmk_registry_find(struct pmk_registry *r, uint64_t id);
/* A failure a FASE cannot report to its caller: the program stops, as it
 * would on a failed assertion, with "pmkit MODE: FASE NAME: WHAT: DETAIL". */
PMK_HIDDEN _Noreturn void pmk_fase_fail(const char *mode,
                                        const struct pmk_fase_head *fase,
                                        const char *what, const char *detail);

/* runtime/clobber: recover slot id if a clobber-mode section is in flight
 * there, in two passes over every slot: restore its clobbered inputs
 * (reexecute 0), then re-execute it (1). 1 recovered in this pass, 0 not,
 * or a negative PMKIT_E_*. */
PMK_HIDDEN int pmk_clobber_recover_slot(pmkit_pool *p, unsigned id,
                                        int reexecute);
/* runtime/ssapp: resume every ssapp-mode FASE in flight (one thread each):
 * the number resumed, or a negative PMKIT_E_*. */
PMK_HIDDEN int pmk_ssapp_recover(pmkit_pool *p);
static inline void *pmk_at(const pmkit_pool *p, uint64_t off) {
  return (void *)(p->base + off);
}

/* heap.c */
struct pmk_tc;
PMK_HIDDEN extern const uint32_t pmk_class_size[PMK_NCLASS];
/* Build the volatile allocator state from the persistent metadata; with
 * `repair`, first finish journals and repair benign leftovers of a crash. */
PMK_HIDDEN int pmk_heap_open(pmkit_pool *p, int repair);
PMK_HIDDEN void pmk_heap_close(pmkit_pool *p);
/* Validate the allocator metadata and the root, and fill `info` (may be
 * NULL); with a `report`, also walk what the root and the contexts reach
 * (see pmkit_check_report), following pool offsets too with
 * PMKIT_GC_OFFSETS in flags. */
PMK_HIDDEN int pmk_heap_check(pmkit_pool *p, pmkit_pool_info *info,
                              pmkit_check_report *report, unsigned flags);
/* 0 if the state page's root fields agree with their check word and the
 * pool has no root object or it is an allocated block (its start) of at
 * least the recorded size; else PMKIT_E_CORRUPT. */
PMK_HIDDEN int pmk_root_check(pmkit_pool *p);
/* pmkit_pool_repair's work on a pool mapped by pool.c (privately for a dry
 * run): rebuild the allocator metadata from the chunk headers and what the
 * root and the contexts reach; every change goes to note() and stats. */
struct pmk_repair {
  void (*note)(void *arg, const char *line);
  void *arg;
  pmkit_repair_stats *stats;
};
PMK_HIDDEN int pmk_heap_repair(pmkit_pool *p, struct pmk_repair *rp);
PMK_HIDDEN void pmk_heap_thread_exit(pmkit_pool *p, struct pmk_tc *tc);
PMK_HIDDEN void pmk_tc_unreserve(pmkit_pool *p);
/* Entries of slot c's journal: the leading ones whose check holds, none
 * unless a section is in flight. */
PMK_HIDDEN uint64_t pmk_journal_count(const struct pmk_ctx_pm *c);
/* Retire the entries at index >= from and release their blocks. */
PMK_HIDDEN void pmk_journal_release(pmkit_pool *p, struct pmk_ctx_pm *c,
                                    uint64_t from);
/* Apply the frees a section deferred (after its commit is durable). */
PMK_HIDDEN void pmk_fase_frees_apply(pmkit_pool *p, struct pmk_tc *tc);

/* The calling thread's state for one pool: allocator cache (heap.c), its
 * context slot and failure-atomic section (ctx.c). */
#define PMK_NONE UINT32_MAX
struct pmk_tcls {
  uint32_t chunk; /* current chunk of this class or PMK_NONE */
  uint32_t word;  /* bitmap word of `mask`, where the next search starts */
  uint64_t mask;  /* blocks of that word reserved (set in PM) but not yet
                     handed out */
};
struct pmk_tc {
  uint64_t serial;
  pmkit_pool *pool;
  pmkit_ctx *ctx;  /* claimed context slot or NULL */
  pmkit_ctx *fase; /* set between pmkit_fase_begin/replay and commit */
  int replay;
  uint64_t rcur; /* next journal entry to replay */
  uint64_t nj;   /* journal entries of the section in flight */
  /* Frees deferred to the section's commit, in DRAM only: a crash before
   * the commit re-executes the section (which frees again) or drops it. */
  uint32_t nfrees;
  uintptr_t frees[PMKIT_FASE_FREES_MAX];
  struct pmk_tcls cls[PMK_NCLASS];
};
PMK_HIDDEN struct pmk_tc *pmk_tc_slow(pmkit_pool *p);
/* initial-exec: a direct %fs-relative load instead of __tls_get_addr on the
 * allocation fast path; 128 bytes fit glibc's static TLS surplus even when
 * libpmkit is loaded with dlopen (as the Python CLI does). */
PMK_HIDDEN extern __thread struct pmk_tc *pmk_tcs[PMK_MAX_POOLS]
    __attribute__((tls_model("initial-exec")));
static inline struct pmk_tc *pmk_tc(pmkit_pool *p) {
  struct pmk_tc *tc = pmk_tcs[p->id];
  if (PMK_LIKELY(tc && tc->serial == p->serial))
    return tc;
  return pmk_tc_slow(p);
}

/* Persist helpers for runtime metadata: store, flush, (no fence); the
 * _line form leaves the flush to the caller, for stores to one line. */
static inline void pmk_store64_line(uint64_t *w, uint64_t v) {
  pmk_crash_point();
  __atomic_store_n(w, v, __ATOMIC_RELEASE);
}
static inline void pmk_store64(uint64_t *w, uint64_t v) {
  pmk_store64_line(w, v);
  pmk_flush_line(w);
}

#endif /* PMKIT_CORE_INTERNAL_H */
