/* SPDX-License-Identifier: Apache-2.0 */
/*
 * undo_log_late.c -- crash corpus: an undo log written after the data it
 * should protect. The program updates an 8-word array in place, twice,
 * making each update failure-atomic with an undo log: the old contents and
 * a `valid` word. Recovery (run by the checker first) copies a valid log
 * back and invalidates it. The bug (-DBUGGY): the program saves the old
 * contents in DRAM, overwrites and persists the data, and only then writes
 * and validates the log, so a crash in between leaves a half-updated array
 * with no valid log to roll it back. The fixed variant persists the old
 * contents, then valid = 1, then overwrites and persists the data, then
 * clears valid: whenever the data may be partly new, a complete log says
 * what it was. Consistent, after recovery: the array holds one whole
 * version, 0 (the zeroed root), 1 or 2. Under eADR the buggy variant still
 * fails: in program order the data changes before any log exists, so a
 * crash inside the update tears the array whatever the caches do
 * (expected: fail).
 */
#define CORPUS_LAYOUT "corpus-undo-log-late"
#include "corpus.h"

#define NUPDATES 2
#define WORDS 8

struct root {
  _Alignas(64) uint64_t data[WORDS];
  _Alignas(64) uint64_t old[WORDS]; /* the undo log's contents */
  _Alignas(64) uint64_t valid;      /* 1: `old` is complete, roll back */
};

/* Word i of version v; version 0 is all zero. */
static uint64_t word_of(uint64_t v, unsigned i) { return v * (1000 + i); }

static void data_write(struct root *r, uint64_t v) {
  for (unsigned i = 0; i < WORDS; i++)
    r->data[i] = word_of(v, i);
  pmkit_persist(r->data, sizeof r->data);
}

static void log_write(struct root *r, const uint64_t *old) {
  memcpy(r->old, old, sizeof r->old);
  pmkit_persist(r->old, sizeof r->old);
  r->valid = 1;
  pmkit_persist(&r->valid, sizeof r->valid);
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t v = 1; !err && v <= NUPDATES; v++) {
    pmkit_mark_begin("update");
#ifdef BUGGY
    uint64_t saved[WORDS];
    memcpy(saved, r->data, sizeof saved);
    data_write(r, v);
    log_write(r, saved); /* too late: the data already changed */
#else
    log_write(r, r->data);
    data_write(r, v);
#endif
    r->valid = 0; /* the update is done */
    pmkit_persist(&r->valid, sizeof r->valid);
    pmkit_mark_end("update");
  }
  return err;
}

/* Roll back an update a crash interrupted. */
static void recover(struct root *r) {
  if (r->valid != 1)
    return;
  memcpy(r->data, r->old, sizeof r->data);
  pmkit_persist(r->data, sizeof r->data);
  r->valid = 0;
  pmkit_persist(&r->valid, sizeof r->valid);
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  if (r->valid > 1)
    return corpus_bad(why, wn, "log valid = %llu",
                      (unsigned long long)r->valid);
  recover(r);
  uint64_t v = r->data[0] / 1000;
  for (unsigned i = 0; i < WORDS; i++)
    if (v > NUPDATES || r->data[i] != word_of(v, i))
      return corpus_bad(why, wn,
                        "the array is no whole version: word 0 is %llu, "
                        "word %u is %llu",
                        (unsigned long long)r->data[0], i,
                        (unsigned long long)r->data[i]);
  return 0;
}
