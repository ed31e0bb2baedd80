/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rmw_fence.c -- crash corpus: a release store taken for a persist fence.
 * The program writes three versions of a 64-byte record, each into the bank
 * the previous version does not use (v & 1), flushes the bank, and commits
 * by advancing the atomic counter `committed`, on a line of its own. The
 * fixed variant advances it with atomic_fetch_add, a locked read-modify-
 * write: on x86 a locked instruction is a full fence, so the bank's
 * write-back completes before the counter changes, with no sfence between
 * them (the sfence after the counter's own flush keeps it durable before
 * the next version reuses the other bank). The bug (-DBUGGY): a release store
 * instead, which on x86 is a plain mov -- release orders visibility of earlier
 * stores, not their write-back -- so the counter can persist before the bank.
 * Consistent: if committed = v > 0, bank v & 1 holds exactly version v. Under
 * eADR the buggy variant is correct: the bank's stores precede the counter
 * store in program order and the caches are persistent, so the missing fence
 * only mattered for the write-back (expected: pass).
 */
#define CORPUS_LAYOUT "corpus-rmw-fence"
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
    pmkit_flush(bank, WORDS * sizeof *bank);
#ifdef BUGGY
    __atomic_store_n(&r->committed, v, __ATOMIC_RELEASE);
#else
    __atomic_fetch_add(&r->committed, 1, __ATOMIC_SEQ_CST); /* locked */
#endif
    /* Durable before the next version overwrites the other bank. */
    pmkit_persist((const void *)&r->committed, sizeof r->committed);
    pmkit_mark_end("commit");
  }
  return err;
}
