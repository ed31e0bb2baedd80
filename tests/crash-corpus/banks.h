/* SPDX-License-Identifier: Apache-2.0 */
/*
 * banks.h -- the record four programs of the crash corpus commit in
 * different ways (commit_no_fence, clflushopt_order, ntstore_no_fence,
 * rmw_fence): versions 1..NVERSIONS of a 64-byte record, each written into
 * the bank the previous version does not use (v & 1) and committed by
 * storing v in `committed`, on a line of its own. Include after corpus.h;
 * the program defines corpus_run. Consistent: if committed = v > 0, bank
 * v & 1 holds exactly version v.
 */
#ifndef PMKIT_CORPUS_BANKS_H
#define PMKIT_CORPUS_BANKS_H

#define NVERSIONS 3
#define WORDS 8

struct root {
  _Alignas(64) uint64_t bank[2][WORDS];
  _Alignas(64) uint64_t committed;
};

/* Word i of version v: distinct for every (v, i) and never zero. */
static uint64_t word_of(uint64_t v, unsigned i) { return v << 32 | (i + 1); }

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  uint64_t v = __atomic_load_n(&r->committed, __ATOMIC_RELAXED);
  if (v > NVERSIONS)
    return corpus_bad(why, wn, "committed = %llu", (unsigned long long)v);
  for (unsigned i = 0; v && i < WORDS; i++)
    if (r->bank[v & 1][i] != word_of(v, i))
      return corpus_bad(why, wn,
                        "version %llu committed, but word %u of bank %u is "
                        "%#llx",
                        (unsigned long long)v, i, (unsigned)(v & 1),
                        (unsigned long long)r->bank[v & 1][i]);
  return 0;
}

#endif /* PMKIT_CORPUS_BANKS_H */
