/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clflushopt_order.c -- crash corpus: clflushopt where only clflush orders.
 * The program writes three versions of a 64-byte record, each into the bank
 * the previous version does not use (v & 1), and commits version v by
 * storing v in `committed`, on a line of its own. The fixed variant uses
 * clflush and no fence at all: clflush is ordered with later stores (the
 * SDM: executions of CLFLUSH are ordered with respect to writes), so the
 * store to `committed` cannot become visible, let alone durable, before
 * the bank's line is written back. The bug (-DBUGGY): the same code with
 * the faster clflushopt, which is ordered with later stores only to the
 * same line, so without an sfence between them `committed` can persist
 * before the bank. Built with -mclflushopt. Consistent: if committed = v >
 * 0, bank v & 1 holds exactly version v. Under eADR the buggy variant is
 * correct: the bank's stores precede the commit in program order and the
 * caches are persistent, so the missing fence only mattered for the
 * write-back (expected: pass).
 */
#include <immintrin.h>

#define CORPUS_LAYOUT "corpus-clflushopt-order"
#include "corpus.h"

#include "banks.h"

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t v = 1; !err && v <= NVERSIONS; v++) {
    pmkit_mark_begin("commit");
    uint64_t *bank = r->bank[v & 1];
    for (unsigned i = 0; i < WORDS; i++)
      bank[i] = word_of(v, i);
#ifdef BUGGY
    _mm_clflushopt(bank); /* not ordered with the next store */
    r->committed = v;
    _mm_clflushopt(&r->committed);
    _mm_sfence();
#else
    _mm_clflush(bank); /* ordered with the next store: no fence needed */
    r->committed = v;
    _mm_clflush(&r->committed);
#endif
    pmkit_mark_end("commit");
  }
  return err;
}
