/* SPDX-License-Identifier: Apache-2.0 */
/*
 * torn_record.c -- crash corpus: a two-word record updated in place. The
 * record is {amount, tag} with tag = seal(amount); the program sets amount
 * to 100, 200 and 300 in turn. The bug (-DBUGGY): it overwrites the live
 * record in place and persists both words afterwards; x86 persists 8 bytes
 * atomically at most, so a crash between the two stores leaves the new
 * amount with the old tag -- a torn record no recovery can repair. The
 * fixed variant is copy-on-write: it writes the new record into the slot
 * not in use, persists it, and only then switches `cur`, one 8-byte store,
 * so the live slot is always a complete record. Consistent: the live slot
 * (slot[cur]) holds an amount of 0 (nothing committed yet), 100, 200 or
 * 300 with its seal. Under eADR the buggy variant still fails: its two
 * stores go to the live record one after the other in program order, and a
 * crash between them tears it whatever the caches do (expected: fail).
 */
#define CORPUS_LAYOUT "corpus-torn-record"
#include "corpus.h"

#define NUPDATES 3

struct rec {
  uint64_t amount, tag;
};

struct root {
  uint64_t cur; /* the live slot, 0 or 1 */
  _Alignas(64) struct rec slot[2];
};

/* seal(0) = 0: the zeroed root is a valid record of amount 0. */
static uint64_t seal(uint64_t amount) { return amount * 0xff51afd7ed558ccdull; }

/* Two separate 8-byte stores, as the compiler could otherwise fuse them
 * into one 16-byte store -- which x86 does not promise to persist
 * atomically either. */
static void rec_write(struct rec *rec, uint64_t amount) {
  *(volatile uint64_t *)&rec->amount = amount;
  *(volatile uint64_t *)&rec->tag = seal(amount);
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t k = 1; !err && k <= NUPDATES; k++) {
    pmkit_mark_begin("update");
#ifdef BUGGY
    struct rec *live = &r->slot[r->cur];
    rec_write(live, 100 * k); /* in place */
    pmkit_persist(live, sizeof *live);
#else
    uint64_t next = r->cur ^ 1;
    rec_write(&r->slot[next], 100 * k);
    pmkit_persist(&r->slot[next], sizeof r->slot[next]);
    r->cur = next; /* the commit: one 8-byte store */
    pmkit_persist(&r->cur, sizeof r->cur);
#endif
    pmkit_mark_end("update");
  }
  return err;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  if (r->cur > 1)
    return corpus_bad(why, wn, "cur = %llu", (unsigned long long)r->cur);
  const struct rec *live = &r->slot[r->cur];
  if (live->amount % 100 || live->amount > 100 * NUPDATES)
    return corpus_bad(why, wn, "live amount %llu was never written",
                      (unsigned long long)live->amount);
  if (live->tag != seal(live->amount))
    return corpus_bad(why, wn, "torn record: amount %llu with tag %#llx",
                      (unsigned long long)live->amount,
                      (unsigned long long)live->tag);
  return 0;
}
