/* SPDX-License-Identifier: Apache-2.0 */
/*
 * checksum_data_flush.c -- crash corpus: a checksummed record whose data is
 * never flushed. The program appends two 128-byte records -- fourteen
 * data words, a sequence number and a checksum over both, the data filling
 * the first line and spilling into the second, where the checksum is -- and
 * commits each by persisting the record count. The checksum lets a reader
 * detect a torn record, but not repair it: a record the count covers must
 * verify. The bug (-DBUGGY): the append flushes only the line holding the
 * sequence number and checksum, so the first line of data can be lost while
 * the count and the checksum are durable. The fixed variant flushes the
 * whole record before the fence that precedes the count. Consistent: every
 * record below `count` has its sequence number, its data and a matching
 * checksum. Under eADR the buggy variant is correct: all record stores
 * precede the count store in program order and a crash keeps a prefix of
 * the stores, so the missing flush is its only bug (expected: pass).
 */
#define CORPUS_LAYOUT "corpus-checksum-data-flush"
#include "corpus.h"

#define NAPPEND 2
#define NDATA 14

struct rec {
  _Alignas(64) uint64_t data[NDATA];
  uint64_t seq;
  uint64_t sum; /* cksum(data, seq) */
};

struct root {
  _Alignas(64) uint64_t count;
  struct rec rec[NAPPEND];
};

static uint64_t data_of(uint64_t seq, unsigned i) {
  return (seq << 40) ^ (i * 0x51ed270b27u) ^ 0xd1b54a32d192ed03ull;
}

static uint64_t cksum(const struct rec *rec) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the words */
  for (unsigned i = 0; i < NDATA; i++)
    h = (h ^ rec->data[i]) * 0x100000001b3ull;
  return (h ^ rec->seq) * 0x100000001b3ull;
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t n = 0; !err && n < NAPPEND; n++) {
    pmkit_mark_begin("append");
    struct rec *rec = &r->rec[n];
    for (unsigned i = 0; i < NDATA; i++)
      rec->data[i] = data_of(n + 1, i);
    rec->seq = n + 1;
    rec->sum = cksum(rec);
#ifdef BUGGY
    pmkit_flush(&rec->seq, 2 * sizeof(uint64_t)); /* the checksum only */
#else
    pmkit_flush(rec, sizeof *rec);
#endif
    pmkit_fence();
    r->count = n + 1;
    pmkit_persist(&r->count, sizeof r->count);
    pmkit_mark_end("append");
  }
  return err;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  if (r->count > NAPPEND)
    return corpus_bad(why, wn, "count = %llu", (unsigned long long)r->count);
  for (uint64_t n = 0; n < r->count; n++) {
    const struct rec *rec = &r->rec[n];
    if (rec->seq != n + 1 || rec->sum != cksum(rec))
      return corpus_bad(why, wn,
                        "record %llu below count %llu: seq %llu, checksum "
                        "%s",
                        (unsigned long long)n, (unsigned long long)r->count,
                        (unsigned long long)rec->seq,
                        rec->sum == cksum(rec) ? "matches" : "does not match");
    for (unsigned i = 0; i < NDATA; i++)
      if (rec->data[i] != data_of(n + 1, i))
        return corpus_bad(why, wn, "record %llu: word %u is %#llx",
                          (unsigned long long)n, i,
                          (unsigned long long)rec->data[i]);
  }
  return 0;
}
