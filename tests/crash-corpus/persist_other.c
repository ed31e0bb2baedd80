/* SPDX-License-Identifier: Apache-2.0 */
/*
 * persist_other.c -- crash corpus: the only fence is another object's
 * persist. Each of two versions writes a settings object and a statistics
 * object, on lines of their own, into the bank version v uses (v & 1), and
 * is committed by persisting `version`. The bug (-DBUGGY): the program
 * calls pmkit_persist on the statistics only, trusting its fence to cover
 * the settings too; a fence orders the flushes issued before it and the
 * settings were never flushed, so `version` can be durable with them lost.
 * The fixed variant flushes the settings before that persist, whose fence
 * then covers both objects. Consistent: if version = v > 0, bank v & 1
 * holds version v's settings and statistics. Under eADR the buggy variant
 * is correct: the settings are stored before `version` in program order and
 * a crash keeps a prefix of the stores, so the missing flush is its only
 * bug (expected: pass).
 */
#define CORPUS_LAYOUT "corpus-persist-other"
#include "corpus.h"

#define NVERSIONS 2
#define WORDS 4

struct bank {
  _Alignas(64) uint64_t settings[WORDS];
  _Alignas(64) uint64_t stats[WORDS];
};

struct root {
  struct bank bank[2];
  _Alignas(64) uint64_t version;
};

static uint64_t setting_of(uint64_t v, unsigned i) { return v * 10 + i + 1; }
static uint64_t stat_of(uint64_t v, unsigned i) { return v * 1000 + i + 1; }

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t v = 1; !err && v <= NVERSIONS; v++) {
    pmkit_mark_begin("configure");
    struct bank *b = &r->bank[v & 1];
    for (unsigned i = 0; i < WORDS; i++)
      b->settings[i] = setting_of(v, i);
    for (unsigned i = 0; i < WORDS; i++)
      b->stats[i] = stat_of(v, i);
#ifndef BUGGY
    pmkit_flush(b->settings, sizeof b->settings);
#endif
    pmkit_persist(b->stats, sizeof b->stats);
    r->version = v;
    pmkit_persist(&r->version, sizeof r->version);
    pmkit_mark_end("configure");
  }
  return err;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  uint64_t v = r->version;
  if (v > NVERSIONS)
    return corpus_bad(why, wn, "version = %llu", (unsigned long long)v);
  const struct bank *b = &r->bank[v & 1];
  for (unsigned i = 0; v && i < WORDS; i++) {
    if (b->settings[i] != setting_of(v, i))
      return corpus_bad(why, wn, "version %llu: setting %u is %llu",
                        (unsigned long long)v, i,
                        (unsigned long long)b->settings[i]);
    if (b->stats[i] != stat_of(v, i))
      return corpus_bad(why, wn, "version %llu: statistic %u is %llu",
                        (unsigned long long)v, i,
                        (unsigned long long)b->stats[i]);
  }
  return 0;
}
