/* SPDX-License-Identifier: Apache-2.0 */
/*
 * commit_no_fence.c -- crash corpus: a commit flag not fenced after the data
 * it commits. The program writes three versions of a 64-byte record, each
 * into the bank the previous version does not use (v & 1), and commits it by
 * storing v in `committed`, on a line of its own. It flushes with clwb and
 * fences with sfence written as inline assembly, as hand-tuned PM code does.
 * The bug (-DBUGGY): no sfence between the clwb of the bank and the store of
 * `committed`; clwb is ordered only by a later fence, so `committed` can
 * reach PM (evicted, or its own clwb) while the bank's write-back is still
 * in flight. The fixed variant fences first, so the bank is durable before
 * `committed` is even stored. Consistent: if committed = v > 0, bank v & 1
 * holds exactly version v. Under eADR the buggy variant is correct: the
 * bank's stores precede the commit in program order and the caches are
 * persistent, so the missing fence only mattered for the write-back
 * (expected: pass).
 */
#define CORPUS_LAYOUT "corpus-commit-no-fence"
#include "corpus.h"

#include "banks.h"

/* The instructions as inline asm, the way code for assemblers without clwb
 * writes them: clwb (%rax) hand-encoded, and sfence. */
static inline void clwb(const void *p) {
  __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x30" ::"a"(p) : "memory");
}
static inline void sfence(void) { __asm__ volatile("sfence" ::: "memory"); }

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t v = 1; !err && v <= NVERSIONS; v++) {
    pmkit_mark_begin("commit");
    uint64_t *bank = r->bank[v & 1];
    for (unsigned i = 0; i < WORDS; i++)
      bank[i] = word_of(v, i);
    clwb(bank);
#ifndef BUGGY
    sfence(); /* the bank is durable before the commit is stored */
#endif
    r->committed = v;
    clwb(&r->committed);
    sfence();
    pmkit_mark_end("commit");
  }
  return err;
}
