/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap_journal.c -- allocation inside a failure-atomic section: each block
 * is recorded in the thread's context slot before it is marked allocated,
 * frees wait for the commit, a replayed section gets the same blocks back in
 * the same order, and open materialises what a crash left journaled. Entry
 * points: pmk_heap_fase_alloc and pmk_heap_fase_free (from pmkit_alloc and
 * pmkit_free), pmk_journal_count, pmk_journal_release,
 * pmk_fase_frees_apply.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapint.h"

/* ---- journaled allocation (failure-atomic sections)
 * ---------------------------- */

/* Journal entry e at the section's next index. The pair shares a line, and
 * its check stands for the order between its two words. A large run is
 * marked allocated after the entry: a fence orders them (without it a
 * crash could leak the run). A small block was marked when the thread
 * reserved it: its entry is durable by the section's next fence, and a
 * crash before leaks it as it leaks the reserved blocks not handed out. */
static void journal_append(struct pmk_ctx_pm *c, struct pmk_tc *tc, uint64_t e,
                           int fence) {
  struct pmk_jent *j = &c->journal[tc->nj];
  pmk_store64_line(&j->e, e);
  pmk_store64_line(&j->check, pmk_journal_check(e, tc->nj, c->seq));
  pmk_flush_line(j);
  if (fence)
    pmk_fence();
  tc->nj++;
}

uint64_t pmk_journal_count(const struct pmk_ctx_pm *c) {
  if (pmk_ctx_state(c) != PMK_CTX_ACTIVE)
    return 0;
  uint64_t n = 0;
  while (n < PMKIT_JOURNAL_MAX &&
         c->journal[n].check == pmk_journal_check(c->journal[n].e, n, c->seq))
    n++;
  return n;
}

static uint64_t entry_of(const pmkit_pool *p, const struct blk *b) {
  uint64_t e = (uint64_t)(b->addr - p->base);
  if (b->large)
    e |= (uint64_t)b->idx << PMK_J_LEN_SHIFT;
  return e;
}

/* Ensure a journaled allocation is marked allocated (idempotent). */
static void materialize(pmkit_pool *p, uint64_t e) {
  uint64_t off = e & PMK_J_OFF_MASK;
  uint32_t n = (uint32_t)(e >> PMK_J_LEN_SHIFT);
  uintptr_t a = p->base + off;
  if (n) {
    uint32_t first =
        (uint32_t)((a - PMK_LARGE_HDR - p->heap) >> PMK_CHUNK_SHIFT);
    if (p->table[first] != (PMK_T_HEAD | n))
      pmk_heap_large_commit(p, first, n);
    return;
  }
  struct blk b;
  if (!pmk_heap_blk_at(p, a, &b) && !pmk_heap_blk_live(p, &b))
    pmk_heap_set_bit(p, &b);
}

void pmk_heap_journal_materialize(pmkit_pool *p, struct pmk_ctx_pm *c) {
  for (uint64_t i = 0, n = pmk_journal_count(c); i < n; i++)
    materialize(p, c->journal[i].e);
}

void pmk_journal_release(pmkit_pool *p, struct pmk_ctx_pm *c, uint64_t from) {
  /* From the end, each entry is retired durably before its block is
   * released: once released, the block may be reallocated and published by
   * another thread, and a crash must not let the journal hand it out again.
   * A crash in between leaks the block instead. */
  for (uint64_t i = pmk_journal_count(c); i-- > from;) {
    uint64_t e = c->journal[i].e;
    pmk_store64(&c->journal[i].check, 0);
    pmk_fence();
    struct blk b;
    if (pmk_heap_blk_at(p, p->base + (e & PMK_J_OFF_MASK), &b))
      continue;
    if (p->freemap)
      pmk_heap_do_free(p, &b, 1);
    else
      pmk_heap_release(p, &b, 1);
  }
}

void pmk_fase_frees_apply(pmkit_pool *p, struct pmk_tc *tc) {
  /* The commit is durable: a crash from here on loses the frees not
   * yet durable (their blocks leak; the thread's next fence ends that window),
   * never applies one twice. */
  for (uint32_t i = 0; i < tc->nfrees; i++) {
    struct blk b;
    if (!pmk_heap_blk_at(p, tc->frees[i], &b) && pmk_heap_blk_live(p, &b))
      pmk_heap_do_free(p, &b, 1);
  }
  tc->nfrees = 0;
}

int pmk_heap_fase_alloc(pmkit_pool *p, struct pmk_tc *tc, size_t size,
                        void **out) {
  struct pmk_ctx_pm *c = tc->fase->pm;
  if (tc->replay) {
    if (tc->rcur < tc->nj) {
      uint64_t e = c->journal[tc->rcur].e;
      struct blk b;
      if (!pmk_heap_blk_at(p, p->base + (e & PMK_J_OFF_MASK), &b) &&
          b.size >= size) {
        tc->rcur++;
        materialize(p, e);
        *out = (void *)b.addr;
        return 0;
      }
      /* Re-execution diverged from the journal: drop the rest of it. */
      pmk_journal_release(p, c, tc->rcur);
      tc->nj = tc->rcur;
    }
    tc->replay = 0;
  }
  if (tc->nj >= PMKIT_JOURNAL_MAX)
    return pmk_err(PMKIT_E_NOSPC,
                   "more than %u allocations in one failure-atomic section",
                   PMKIT_JOURNAL_MAX);
  struct blk b;
  int r = pmk_heap_reserve(p, tc, size, &b);
  if (r)
    return r;
  journal_append(c, tc, entry_of(p, &b), b.large);
  pmk_heap_commit(p, &b);
  *out = (void *)b.addr;
  return 0;
}

/* Deferred to commit, in DRAM only: before the commit is
 * durable the section is re-executed (and frees again) or dropped. */
int pmk_heap_fase_free(struct pmk_tc *tc, struct blk *b) {
  if (tc->nfrees >= PMKIT_FASE_FREES_MAX)
    return pmk_err(PMKIT_E_NOSPC,
                   "more than %u frees in one failure-atomic section",
                   PMKIT_FASE_FREES_MAX);
  tc->frees[tc->nfrees++] = b->addr;
  return 0;
}
