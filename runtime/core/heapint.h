/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heapint.h -- what the allocator's own files share, and nothing outside
 * them includes: heap.c (size classes, chunks, thread caches, reserve and
 * commit, the public allocation API), heap_journal.c (allocation journaled
 * by failure-atomic sections), heap_open.c (rebuild at open, check),
 * heap_gc.c (reachability, for check and gc) and heap_repair.c
 * (pmkit_pool_repair). The allocator's interface to the rest of the core
 * is heap.h.
 */
#ifndef PMKIT_CORE_HEAPINT_H
#define PMKIT_CORE_HEAPINT_H

#include "internal.h"

static inline uint32_t nblocks_of(unsigned c) {
  return (PMK_CHUNK - PMK_CHUNK_HDR) / pmk_class_size[c];
}

static inline uintptr_t chunk_addr(const pmkit_pool *p, uint32_t id) {
  return p->heap + ((uintptr_t)id << PMK_CHUNK_SHIFT);
}

static inline struct pmk_chunk *chunk_hdr(const pmkit_pool *p, uint32_t id) {
  return (struct pmk_chunk *)chunk_addr(p, id);
}

/* A live or dead block slot: where it is and how it is recorded. */
struct blk {
  uint32_t chunk; /* small: its chunk; large: the head chunk */
  uint32_t idx;   /* small: block index; large: run length */
  int large;
  uintptr_t addr;
  size_t size;
};

struct gc {
  pmkit_pool *p;
  uint64_t **marks; /* per chunk: one bit per block (large: bit 0) */
  uint32_t *head;   /* per chunk: its run's head chunk, or itself */
  uintptr_t *stack;
  size_t n, cap;
  int oom;
  unsigned flags;
  uintptr_t from;         /* the block being scanned (0: a root) */
  uint64_t dangling;      /* words pointing into free blocks or free chunks */
  uint64_t dangling_ptrs; /* of them, pointers (not offsets) */
  uintptr_t dang_at, dang_from;
};

/* heap.c */
PMK_HIDDEN extern pthread_once_t pmk_heap_cls_once;
PMK_HIDDEN void pmk_heap_cls_init(void);
PMK_HIDDEN void pmk_heap_table_store(pmkit_pool *p, uint32_t id, uint32_t v);
PMK_HIDDEN int pmk_heap_blk_at(const pmkit_pool *p, uintptr_t a, struct blk *b);
PMK_HIDDEN int pmk_heap_blk_live(const pmkit_pool *p, const struct blk *b);
PMK_HIDDEN void pmk_heap_list_push(struct pmk_list *l, uint32_t id);
PMK_HIDDEN void pmk_heap_large_commit(pmkit_pool *p, uint32_t first,
                                      uint32_t n);
PMK_HIDDEN int pmk_heap_reserve(pmkit_pool *p, struct pmk_tc *tc, size_t size,
                                struct blk *b);
PMK_HIDDEN void pmk_heap_commit(pmkit_pool *p, const struct blk *b);
PMK_HIDDEN void pmk_heap_set_bit(pmkit_pool *p, const struct blk *b);
PMK_HIDDEN int pmk_heap_release(pmkit_pool *p, const struct blk *b, int flush);
PMK_HIDDEN int pmk_heap_do_free(pmkit_pool *p, struct blk *b, int flush);

/* heap_journal.c */
PMK_HIDDEN void pmk_heap_journal_materialize(pmkit_pool *p,
                                             struct pmk_ctx_pm *c);
PMK_HIDDEN int pmk_heap_fase_alloc(pmkit_pool *p, struct pmk_tc *tc,
                                   size_t size, void **out);
PMK_HIDDEN int pmk_heap_fase_free(struct pmk_tc *tc, struct blk *b);

/* heap_open.c */
PMK_HIDDEN int pmk_heap_journals_ok(pmkit_pool *p);
PMK_HIDDEN uint32_t pmk_heap_tail_clear(const struct pmk_chunk *ch,
                                        uint32_t nb);
PMK_HIDDEN int pmk_heap_small_header(const struct pmk_chunk *ch);
PMK_HIDDEN uint32_t pmk_heap_blocks_used(const struct pmk_chunk *ch);
PMK_HIDDEN int pmk_heap_table_ok(pmkit_pool *p, uint64_t *gaps);
PMK_HIDDEN int pmk_heap_root_fields_ok(const pmkit_pool *p);

/* heap_gc.c */
PMK_HIDDEN int pmk_heap_journaled(const pmkit_pool *p, uint64_t off);
PMK_HIDDEN int pmk_heap_gc_mark(struct gc *g);
PMK_HIDDEN void pmk_heap_gc_free(struct gc *g);
PMK_HIDDEN void pmk_heap_repair_note(const struct pmk_repair *rp,
                                     const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
PMK_HIDDEN void pmk_heap_gc_sweep(struct gc *g, uint64_t **orig,
                                  struct pmk_repair *rp, pmkit_gc_stats *st,
                                  uint64_t *restored);

#endif /* PMKIT_CORE_HEAPINT_H */
