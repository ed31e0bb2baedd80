/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ntstore_no_fence.c -- crash corpus: non-temporal stores not fenced before
 * the commit. The program writes three versions of a 64-byte record with
 * movnti (_mm_stream_si64), each into the bank the previous version does
 * not use (v & 1), and commits version v by storing v in `committed` with
 * an ordinary store, clwb and sfence. The bug (-DBUGGY): no sfence between
 * the non-temporal stores and the store to `committed`. Non-temporal stores
 * bypass the cache through write-combining buffers and are ordered with
 * later stores only by a fence, so `committed` can become visible -- and
 * durable -- before the bank. The fixed variant issues sfence after the
 * bank, which drains the write-combining buffers to the persistence
 * domain. Consistent: if committed = v > 0, bank v & 1 holds exactly
 * version v. Under eADR the buggy variant still fails: eADR makes the
 * caches persistent, not the write-combining buffers, and the store to
 * `committed` can reach the cache before the bank leaves them; this is why
 * PM libraries keep the sfence of their drain under eADR (expected: fail).
 */
#include <immintrin.h>

#define CORPUS_LAYOUT "corpus-ntstore-no-fence"
#include "corpus.h"

#include "banks.h"

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t v = 1; !err && v <= NVERSIONS; v++) {
    pmkit_mark_begin("commit");
    long long *bank = (long long *)r->bank[v & 1];
    for (unsigned i = 0; i < WORDS; i++)
      _mm_stream_si64(&bank[i], (long long)word_of(v, i));
#ifndef BUGGY
    _mm_sfence(); /* drain the write-combining buffers first */
#endif
    r->committed = v;
    pmkit_persist(&r->committed, sizeof r->committed);
    pmkit_mark_end("commit");
  }
  return err;
}
