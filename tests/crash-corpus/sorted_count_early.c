/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sorted_count_early.c -- crash corpus: a sorted array whose count grows
 * before the slot it exposes is written. The program inserts five keys, in
 * no particular order, into a sorted array of nonzero keys in place; the
 * array is keys[0, count). The fixed variant shifts the way FAST&FAIR does:
 * it first copies the last key into the free slot past the end and persists
 * it, then persists count + 1, then moves keys up one at a time from the
 * top, persisting each, and finally persists the new key in the hole. Every
 * state a crash can leave is the old array with one key duplicated next to
 * itself (an insertion in progress, which readers skip) or the new array.
 * The bug (-DBUGGY): the insertion persists count + 1 first, to reserve the
 * slot, and writes the slot afterwards, so a crash in between exposes a slot
 * that holds no key. Consistent: keys[0, count) are nonzero and ascending
 * except for at most one adjacent duplicate; without a duplicate they are
 * the first `count` keys inserted, with one they are the first count - 1.
 * Under eADR the buggy variant still fails: the count store precedes the
 * slot store in program order, so a crash between them shows the empty
 * slot whatever the caches do (expected: fail).
 */
#define CORPUS_LAYOUT "corpus-sorted-count-early"
#include "corpus.h"

#define CAP 8

static const uint64_t inserted[] = {50, 20, 80, 10, 30};
#define NINSERT (sizeof inserted / sizeof inserted[0])

struct root {
  _Alignas(64) uint64_t count;
  _Alignas(64) uint64_t keys[CAP];
};

static void insert(struct root *r, uint64_t k) {
  uint64_t n = r->count, p = 0;
  while (p < n && r->keys[p] < k)
    p++;
#ifdef BUGGY
  r->count = n + 1; /* reserve the slot first: too early */
  pmkit_persist(&r->count, sizeof r->count);
#endif
  /* The slot past the end takes the last key (or k, if k goes last), so
   * the array only ever gains a duplicate. */
  r->keys[n] = p == n ? k : r->keys[n - 1];
  pmkit_persist(&r->keys[n], sizeof r->keys[n]);
#ifndef BUGGY
  r->count = n + 1;
  pmkit_persist(&r->count, sizeof r->count);
#endif
  if (p == n)
    return;
  for (uint64_t i = n - 1; i > p; i--) { /* move the duplicate down */
    r->keys[i] = r->keys[i - 1];
    pmkit_persist(&r->keys[i], sizeof r->keys[i]);
  }
  r->keys[p] = k; /* the duplicate becomes k */
  pmkit_persist(&r->keys[p], sizeof r->keys[p]);
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (unsigned i = 0; !err && i < NINSERT; i++) {
    pmkit_mark_begin("insert");
    insert(r, inserted[i]);
    pmkit_mark_end("insert");
  }
  return err;
}

/* 1 if key is among the first m keys inserted. */
static int among_first(uint64_t key, uint64_t m) {
  for (uint64_t i = 0; i < m; i++)
    if (inserted[i] == key)
      return 1;
  return 0;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  uint64_t n = r->count, dups = 0;
  if (n > NINSERT)
    return corpus_bad(why, wn, "count = %llu", (unsigned long long)n);
  for (uint64_t i = 0; i < n; i++) {
    if (r->keys[i] == 0)
      return corpus_bad(why, wn, "slot %llu below count %llu holds no key",
                        (unsigned long long)i, (unsigned long long)n);
    if (i > 0 && r->keys[i] < r->keys[i - 1])
      return corpus_bad(why, wn, "slots %llu and %llu are out of order",
                        (unsigned long long)i - 1, (unsigned long long)i);
    if (i > 0 && r->keys[i] == r->keys[i - 1])
      dups++;
  }
  if (dups > 1)
    return corpus_bad(why, wn, "%llu duplicated keys",
                      (unsigned long long)dups);
  /* n - dups distinct keys, all among the first n - dups inserted: they
   * are exactly those. */
  for (uint64_t i = 0; i < n; i++)
    if (!among_first(r->keys[i], n - dups))
      return corpus_bad(
          why, wn, "key %llu is not among the first %llu inserted",
          (unsigned long long)r->keys[i], (unsigned long long)(n - dups));
  return 0;
}
