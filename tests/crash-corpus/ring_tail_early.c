/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring_tail_early.c -- crash corpus: an append-only log whose tail moves
 * before the entry is written. The program appends three entries (sequence
 * number, payload, and a check word) to a log of one-line slots; the tail
 * index says how many are valid. The bug (-DBUGGY): the append reserves its
 * slot by advancing and persisting the tail first and writes the entry
 * afterwards, so a crash in between leaves the tail covering an empty or
 * half-written slot. The fixed variant writes and persists the entry, then
 * advances and persists the tail: the tail never covers a slot that is not
 * durable. Consistent: every slot below the tail holds entry i with its
 * payload and check word. Under eADR the buggy variant still fails: the
 * tail store precedes the entry's stores in program order, so a crash
 * between them exposes the empty slot whatever the caches do (expected:
 * fail).
 */
#define CORPUS_LAYOUT "corpus-ring-tail-early"
#include "corpus.h"

#define NSLOTS 4
#define NAPPEND 3

struct slot {
  _Alignas(64) uint64_t seq; /* i + 1 for the i-th entry */
  uint64_t payload;
  uint64_t check; /* seq ^ payload ^ CHECK */
};

struct root {
  _Alignas(64) uint64_t tail; /* entries [0, tail) are valid */
  struct slot slot[NSLOTS];
};

#define CHECK 0xc0ffee0000c0ffeeull

static uint64_t payload_of(uint64_t seq) { return seq * 0x2545f4914f6cdd1dull; }

static void slot_write(struct slot *s, uint64_t seq) {
  s->seq = seq;
  s->payload = payload_of(seq);
  s->check = seq ^ s->payload ^ CHECK;
  pmkit_persist(s, sizeof *s);
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t i = 0; !err && i < NAPPEND; i++) {
    pmkit_mark_begin("append");
    uint64_t t = r->tail;
#ifdef BUGGY
    r->tail = t + 1; /* reserve the slot first: too early */
    pmkit_persist(&r->tail, sizeof r->tail);
    slot_write(&r->slot[t % NSLOTS], i + 1);
#else
    slot_write(&r->slot[t % NSLOTS], i + 1);
    r->tail = t + 1;
    pmkit_persist(&r->tail, sizeof r->tail);
#endif
    pmkit_mark_end("append");
  }
  return err;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  if (r->tail > NAPPEND)
    return corpus_bad(why, wn, "tail = %llu", (unsigned long long)r->tail);
  for (uint64_t i = 0; i < r->tail; i++) {
    const struct slot *s = &r->slot[i % NSLOTS];
    if (s->seq != i + 1 || s->payload != payload_of(i + 1) ||
        s->check != (s->seq ^ s->payload ^ CHECK))
      return corpus_bad(why, wn,
                        "slot %llu below tail %llu: seq %llu, payload %#llx, "
                        "check %#llx",
                        (unsigned long long)i, (unsigned long long)r->tail,
                        (unsigned long long)s->seq,
                        (unsigned long long)s->payload,
                        (unsigned long long)s->check);
  }
  return 0;
}
