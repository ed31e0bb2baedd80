/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap.h -- the allocator (heap.c) and the calling thread's per-pool state:
 * its allocation caches, context slot and section in flight.
 */
#ifndef PMKIT_CORE_HEAP_H
#define PMKIT_CORE_HEAP_H

#include <stdint.h>

#include "pool.h"

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

#endif /* PMKIT_CORE_HEAP_H */
