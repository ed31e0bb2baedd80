/* SPDX-License-Identifier: Apache-2.0 */
/*
 * flush_wrong_line.c -- crash corpus: the flush names the neighbouring cache
 * line. The program appends two records to a table of one-line records
 * and publishes each by persisting the count of records; it flushes with
 * the clflush and sfence intrinsics. The bug (-DBUGGY): an off-by-one in the
 * slot index flushes record n + 1 -- the next, still unused line -- instead
 * of record n, so record n is never written back and the persisted count
 * can cover a record that never reached PM. The fixed variant flushes
 * record n's own line and fences before storing the count. Consistent:
 * every record below `count` holds the id and fields of its append. Under
 * eADR the buggy variant is correct: the record's stores precede the count
 * store in program order and a crash keeps a prefix of the stores; the
 * wrong flush only mattered with volatile caches (expected: pass).
 */
#include <emmintrin.h>

#define CORPUS_LAYOUT "corpus-flush-wrong-line"
#include "corpus.h"

#define NAPPEND 2

struct rec {
  _Alignas(64) uint64_t id;
  uint64_t field[7];
};

struct root {
  _Alignas(64) uint64_t count;
  struct rec rec[NAPPEND + 1]; /* one spare: the line the bug flushes */
};

static uint64_t field_of(uint64_t id, unsigned i) {
  return id * 0x9e3779b97f4a7c15ull + i;
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t n = 0; !err && n < NAPPEND; n++) {
    pmkit_mark_begin("append");
    struct rec *rec = &r->rec[n];
    rec->id = n + 1;
    for (unsigned i = 0; i < 7; i++)
      rec->field[i] = field_of(n + 1, i);
#ifdef BUGGY
    _mm_clflush(&r->rec[n + 1]); /* off by one: the neighbouring line */
#else
    _mm_clflush(rec);
#endif
    _mm_sfence();
    r->count = n + 1;
    _mm_clflush(&r->count);
    _mm_sfence();
    pmkit_mark_end("append");
  }
  return err;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  if (r->count > NAPPEND)
    return corpus_bad(why, wn, "count = %llu", (unsigned long long)r->count);
  for (uint64_t n = 0; n < r->count; n++) {
    const struct rec *rec = &r->rec[n];
    if (rec->id != n + 1)
      return corpus_bad(why, wn, "record %llu has id %llu, count %llu",
                        (unsigned long long)n, (unsigned long long)rec->id,
                        (unsigned long long)r->count);
    for (unsigned i = 0; i < 7; i++)
      if (rec->field[i] != field_of(n + 1, i))
        return corpus_bad(why, wn, "record %llu: field %u is %#llx",
                          (unsigned long long)n, i,
                          (unsigned long long)rec->field[i]);
  }
  return 0;
}
