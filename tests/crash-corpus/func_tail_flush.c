/* SPDX-License-Identifier: Apache-2.0 */
/*
 * func_tail_flush.c -- crash corpus: a function whose last write is never
 * flushed. entry_set() fills a two-line entry: key and value in the first
 * line, which it flushes, then a stamp in the second line, written last.
 * Its caller fences and commits the entry by persisting the entry count.
 * The bug (-DBUGGY): entry_set() returns without flushing the stamp's line,
 * so the caller's fence orders nothing for it and the count can be durable
 * while the stamp is lost. The fixed variant flushes the stamp too before
 * it returns, and the caller's fence then makes the whole entry durable
 * before the count is stored. Consistent: every entry below `count` holds
 * its key, value and stamp. Under eADR the buggy variant is correct: the
 * stamp is stored before the count in program order and a crash keeps a
 * prefix of the stores, so the missing flush is its only bug (expected:
 * pass).
 */
#define CORPUS_LAYOUT "corpus-func-tail-flush"
#include "corpus.h"

#define NENTRIES 3

struct entry {
  _Alignas(64) uint64_t key;
  uint64_t val;
  _Alignas(64) uint64_t stamp; /* key ^ STAMP: the entry is complete */
};

struct root {
  _Alignas(64) uint64_t count;
  struct entry e[NENTRIES];
};

#define STAMP 0x5ca1ab1e00000000ull

static uint64_t val_of(uint64_t key) { return key * key + 7; }

/* Fill entry e and flush it; the caller fences. */
static void entry_set(struct entry *e, uint64_t key) {
  e->key = key;
  e->val = val_of(key);
  pmkit_flush(e, 2 * sizeof(uint64_t));
  e->stamp = key ^ STAMP;
#ifndef BUGGY
  pmkit_flush(&e->stamp, sizeof e->stamp);
#endif
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t n = 0; !err && n < NENTRIES; n++) {
    pmkit_mark_begin("add");
    entry_set(&r->e[n], n + 1);
    pmkit_fence(); /* the entry before the count that commits it */
    r->count = n + 1;
    pmkit_persist(&r->count, sizeof r->count);
    pmkit_mark_end("add");
  }
  return err;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  if (r->count > NENTRIES)
    return corpus_bad(why, wn, "count = %llu", (unsigned long long)r->count);
  for (uint64_t n = 0; n < r->count; n++) {
    const struct entry *e = &r->e[n];
    uint64_t key = n + 1;
    if (e->key != key || e->val != val_of(key) || e->stamp != (key ^ STAMP))
      return corpus_bad(why, wn,
                        "entry %llu below count %llu: key %llu, value %llu, "
                        "stamp %#llx",
                        (unsigned long long)n, (unsigned long long)r->count,
                        (unsigned long long)e->key, (unsigned long long)e->val,
                        (unsigned long long)e->stamp);
  }
  return 0;
}
