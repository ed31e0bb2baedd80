/* SPDX-License-Identifier: Apache-2.0 */
/*
 * byte_encoded_flush.c -- crash corpus: write-backs spelt the way code for
 * assemblers without clwb and clflushopt spells them (PMDK did): a 0x66
 * prefix byte before an older mnemonic, ".byte 0x66; xsaveopt m" for clwb
 * (66 0f ae /6) and ".byte 0x66; clflush m" for clflushopt (66 0f ae /7).
 * Their text names neither instruction, and the second names clflush, which
 * persists at once; only their bytes say what they do. The program writes
 * three versions of a 64-byte record, each into the bank the previous
 * version does not use (v & 1), and commits version v by storing v in
 * `committed`, on a line of its own, which it writes back with the encoded
 * clflushopt and a fence. The fixed variant writes the bank back with the
 * encoded clwb and fences before the commit is stored. The bug (-DBUGGY):
 * the bank is written back with the encoded clflushopt and no fence before
 * the commit is stored; clflushopt is ordered with later stores only to its
 * own line, so `committed` can persist before the bank. A tracer that read
 * the text would miss the fixed variant's clwb (a false failure) and take
 * the buggy variant's clflushopt for a clflush (a false pass). Consistent:
 * if committed = v > 0, bank v & 1 holds exactly version v. Under eADR the
 * buggy variant is correct: the bank's stores precede the commit in program
 * order and the caches are persistent (expected: pass).
 */
#define CORPUS_LAYOUT "corpus-byte-encoded-flush"
#include "corpus.h"

#include "banks.h"

static inline __attribute__((unused)) void clwb(const void *p) {
  __asm__ volatile(".byte 0x66; xsaveopt %0" : "+m"(*(volatile char *)p));
}
static inline void clflushopt(const void *p) {
  __asm__ volatile(".byte 0x66; clflush %0" : "+m"(*(volatile char *)p));
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
#ifdef BUGGY
    clflushopt(bank); /* not ordered with the store to `committed` */
#else
    clwb(bank);
    sfence(); /* the bank is durable before the commit is stored */
#endif
    r->committed = v;
    clflushopt(&r->committed);
    sfence();
    pmkit_mark_end("commit");
  }
  return err;
}
