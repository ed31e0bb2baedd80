/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tatp.c -- the TATP update_location transaction on the subscriber table,
 * one source for every variant of bench/common/bench.h. Load key k creates
 * subscriber k: a 64-byte row in one PM array (s_id, the 15-digit sub_nbr
 * string, the bit/hex/byte2 fields, msc_location, vlr_location) and an
 * entry in a persistent open-addressing index from sub_nbr to row. Every
 * operation of the run, whatever its kind, is one update_location: format
 * the sub_nbr of op->key, look it up in the index (read-only after the
 * load, so lock-free), then set vlr_location under the row's striped DRAM
 * lock. The new vlr_location names the operation (its thread and index)
 * and carries the row's update sequence number, all in one aligned 8-byte
 * word: the update is a single failure-atomic store in the hand variants
 * (and one snapshot under pmdk), and the check can tell exactly which
 * update wrote each row and how many updates reached it.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* vlr_location: seq (16 bits) | who (7: 0 the load, else thread + 1) |
 * idx (41: the operation's index in its thread, or the key for the load). */
#define SEQ_SHIFT 48
#define WHO_SHIFT 41
#define IDX_MASK ((UINT64_C(1) << WHO_SHIFT) - 1)
#define SEQ_MASK UINT64_C(0xffff)
#define TAG_MASK ((UINT64_C(1) << SEQ_SHIFT) - 1)
#define STAMP_IDX(s) ((s) & ((UINT64_C(1) << 48) - 1))

struct sub {
  uint64_t s_id;
  char sub_nbr[16]; /* 15 digits of s_id, zero-padded, and a NUL */
  uint16_t bits;    /* bit_1 .. bit_10 */
  uint8_t hex[5];   /* hex_1 .. hex_10, a nibble each */
  uint8_t byte2[10];
  uint32_t msc_location;
  uint64_t vlr_location; /* the one field update_location writes */
  uint64_t pad;
};
_Static_assert(sizeof(struct sub) == 64, "a subscriber is one cache line");

struct root {
  uint64_t nsubs;
  uint64_t mask;    /* index slots - 1; slots are a power of two >= 2x */
  struct sub *rows; /* nsubs rows; row k is subscriber k */
  uint64_t *slot;   /* index: row + 1, or 0 for empty */
};

static bench_lock *locks; /* DRAM, striped over the rows */
static uint64_t nlocks;

static void make_nbr(char nbr[16], uint64_t id) {
  for (int i = 14; i >= 0; i--, id /= 10)
    nbr[i] = (char)('0' + id % 10);
  nbr[15] = 0;
}

static uint64_t nbr_hash(const char nbr[16]) {
  uint64_t w[2];
  memcpy(w, nbr, sizeof w);
  return bench_mix64(w[0] * 0x9e3779b97f4a7c15ull ^ bench_mix64(w[1]));
}

/* The fields the load gives subscriber k besides s_id, sub_nbr and
 * vlr_location; the check compares every row with them. */
static void make_fields(struct sub *s, uint64_t k) {
  uint64_t h = bench_mix64(k ^ 0x7461747073756273ull), g = bench_mix64(h);
  s->bits = (uint16_t)(h & 0x3ff);
  for (int i = 0; i < 5; i++)
    s->hex[i] = (uint8_t)(h >> (16 + 8 * i));
  for (int i = 0; i < 8; i++)
    s->byte2[i] = (uint8_t)(g >> (8 * i));
  s->byte2[8] = (uint8_t)(h >> 56);
  s->byte2[9] = (uint8_t)(h >> 10);
  s->msc_location = (uint32_t)(g >> 17);
}

/* The row of sub_nbr, or -1. */
static int64_t lookup(const struct root *r, const char nbr[16]) {
  for (uint64_t p = nbr_hash(nbr) & r->mask;; p = (p + 1) & r->mask) {
    uint64_t v = r->slot[p];
    if (!v)
      return -1;
    if (!memcmp(r->rows[v - 1].sub_nbr, nbr, 16))
      return (int64_t)(v - 1);
  }
}

static int tatp_init(void *rootp) {
  struct root *r = rootp;
  uint64_t n = 1, keys = bench_cfg->keys;
  while (n < 2 * keys)
    n <<= 1;
  PM_TX_ADD(r, sizeof *r);
  r->rows = pm_alloc(keys * sizeof *r->rows);
  r->slot = pm_alloc(n * sizeof *r->slot);
  if (!r->rows || !r->slot)
    return -1;
  PM_FLUSH(r->rows, keys * sizeof *r->rows);
  PM_FLUSH(r->slot, n * sizeof *r->slot);
  PM_FENCE(); /* zeroed table and index durable before the root names them */
  r->nsubs = keys;
  r->mask = n - 1;
  PM_PERSIST(r, sizeof *r);
  return 0;
}

static int tatp_attach(void *rootp) {
  (void)rootp;
  nlocks = 1;
  while (nlocks < bench_cfg->keys && nlocks < (1u << 16))
    nlocks <<= 1;
  return bench_locks_init(&locks, nlocks);
}

/* Load: subscriber k. The row is durable before the index slot that
 * publishes it (the commit, one 8-byte store), so a crash leaves k either
 * absent or complete. A re-run finds it in the index and leaves it alone:
 * no update runs before the load ends, so the row already holds what an
 * update with the load's stamp would write. */
static int load_sub(struct root *r, uint64_t k) {
  char nbr[16];
  make_nbr(nbr, k);
  if (lookup(r, nbr) >= 0)
    return 0;
  struct sub *s = &r->rows[k];
  PM_TX_ADD(s, sizeof *s);
  s->s_id = k;
  memcpy(s->sub_nbr, nbr, 16);
  make_fields(s, k);
  s->vlr_location = k; /* seq 0, who 0: the load */
  PM_PERSIST(s, sizeof *s);
  uint64_t p = nbr_hash(nbr) & r->mask;
  while (r->slot[p])
    p = (p + 1) & r->mask;
  PM_TX_ADD(&r->slot[p], sizeof r->slot[p]);
  r->slot[p] = k + 1;
  PM_PERSIST(&r->slot[p], sizeof r->slot[p]);
  return 0;
}

/* update_location. Hand variants: the commit point is the aligned 8-byte
 * store of vlr_location (x86 makes it atomic), durable before op returns
 * and before the driver persists the thread's counter, so a crash leaves
 * the row old or new and may leave the in-flight operation applied but
 * uncounted (the check allows exactly that). pmdk: the store is a snapshot
 * of the driver's transaction and commits with the counter. The driver
 * releases the lock only once the operation has committed, so no update
 * builds on a sequence number a crash could still lose. */
static int tatp_op(void *rootp, unsigned tid, const struct bench_op *op,
                   void *scratch) {
  struct root *r = rootp;
  (void)scratch;
  if (op->key >= r->nsubs)
    return -1;
  if (op->kind == BENCH_INSERT)
    return load_sub(r, op->key);
  char nbr[16];
  make_nbr(nbr, op->key);
  int64_t row = lookup(r, nbr);
  if (row < 0)
    return -1;
  struct sub *s = &r->rows[row];
  bench_lock *l = &locks[(uint64_t)row & (nlocks - 1)];
  uint64_t tag =
      (uint64_t)(tid + 1) << WHO_SHIFT | (STAMP_IDX(op->stamp) & IDX_MASK);
  bench_lock_acquire(l);
  /* The row shows this very operation when a crash struck after its store
   * and before its counter and the resumed run repeats it: done already. */
  if ((s->vlr_location & TAG_MASK) != tag) {
    uint64_t seq = ((s->vlr_location >> SEQ_SHIFT) + 1) & SEQ_MASK;
    PM_TX_ADD(&s->vlr_location, sizeof s->vlr_location);
    s->vlr_location = seq << SEQ_SHIFT | tag;
    PM_PERSIST(&s->vlr_location, sizeof s->vlr_location);
  }
  bench_lock_release(l);
  return 0;
}

/* ---- the check -----------------------------------------------------------
 * Structure: the index holds each subscriber exactly once, reachable from
 * its home slot, and every row holds the fields the load wrote. Then, per
 * row s with vlr_location = (seq, who, idx), against the stream, where
 * cnt(s) counts the completed updates to s (all threads) and thread t's
 * in-flight operation is its op bench_done(t):
 *  - who = 0 (the load): idx = s and no update reached s: seq = cnt = 0.
 *  - who = t + 1: operation idx of thread t targets s, idx <= done(t), and
 *    no completed operation of thread t after idx targets s (its own later
 *    update would have overwritten this one).
 *  - d = seq - cnt(s) (mod 2^16) counts the updates that reached s beyond
 *    the completed ones: never negative (no completed update is lost), and
 *    at least 1 if the row shows an in-flight update.
 *  - One thread: d is at most 1 if its in-flight operation targets s and
 *    the row shows it, else 0. A resumed run repeats the operation a crash
 *    left in flight, but finds its own tag and does not count it twice.
 *    With several threads another thread may have overwritten it first, so
 *    the repeat counts again: there d has no upper bound.
 * With one thread this is exact: the row shows the last completed update
 * or the in-flight one, and seq the number of updates. With several it is
 * as exact as a row can tell without the order of other threads' updates.
 * A counter rewound below the updates a row shows fails the idx rule (and
 * the seq rule with one thread). */

static int check_row(const struct sub *s, uint64_t k, struct bench_check *c) {
  struct sub want = {.s_id = k};
  make_nbr(want.sub_nbr, k);
  make_fields(&want, k);
  if (s->s_id != k || memcmp(s->sub_nbr, want.sub_nbr, 16) ||
      s->bits != want.bits || memcmp(s->hex, want.hex, sizeof want.hex) ||
      memcmp(s->byte2, want.byte2, sizeof want.byte2) ||
      s->msc_location != want.msc_location)
    return bench_fail(c, "subscriber %" PRIu64 ": a field is not the load's",
                      k);
  return 0;
}

static int check_index(const struct root *r, uint8_t *seen,
                       struct bench_check *c) {
  uint64_t n = 0;
  for (uint64_t p = 0; p <= r->mask; p++) {
    uint64_t v = r->slot[p];
    if (!v)
      continue;
    if (v > r->nsubs || seen[v - 1]++)
      return bench_fail(
          c, "index slot %" PRIu64 ": bad or repeated row %" PRIu64, p, v - 1);
    if (check_row(&r->rows[v - 1], v - 1, c))
      return -1;
    for (uint64_t q = nbr_hash(r->rows[v - 1].sub_nbr) & r->mask; q != p;
         q = (q + 1) & r->mask)
      if (!r->slot[q])
        return bench_fail(c, "subscriber %" PRIu64 " is unreachable", v - 1);
    n++;
  }
  if (n != r->nsubs)
    return bench_fail(c,
                      "the index holds %" PRIu64 " of %" PRIu64 " subscribers",
                      n, r->nsubs);
  return 0;
}

static int tatp_check(void *rootp, struct bench_check *c) {
  struct root *r = rootp;
  uint64_t keys = bench_cfg->keys;
  unsigned nt = bench_cfg->threads;
  if (!r->rows || !r->slot || r->nsubs != keys || ((r->mask + 1) & r->mask) ||
      r->mask + 1 < 2 * keys)
    return bench_fail(c, "the root is missing or malformed");
  uint8_t *seen = calloc(keys, 1);
  uint32_t *cnt = calloc(keys, sizeof *cnt);
  int rc =
      !seen || !cnt ? bench_fail(c, "out of memory") : check_index(r, seen, c);
  /* Replay: count completed updates per row, and catch a completed update
   * later in its thread than the one the row shows from that thread. */
  for (unsigned t = 0; t < nt && !rc; t++) {
    uint64_t done = bench_done(t);
    for (uint64_t i = 0; i < done && !rc; i++) {
      uint64_t k = bench_op_at(t, i).key, v = r->rows[k].vlr_location;
      cnt[k]++;
      if (((v >> WHO_SHIFT) & 0x7f) == t + 1 && (v & IDX_MASK) < i)
        rc = bench_fail(c,
                        "subscriber %" PRIu64 " shows thread %u op %" PRIu64
                        ", overwritten by its completed op %" PRIu64,
                        k, t, v & IDX_MASK, i);
    }
  }
  for (uint64_t k = 0; k < keys && !rc; k++) {
    uint64_t v = r->rows[k].vlr_location, idx = v & IDX_MASK;
    unsigned who = (unsigned)(v >> WHO_SHIFT) & 0x7f;
    uint64_t d = ((v >> SEQ_SHIFT) - cnt[k]) & SEQ_MASK;
    if (who == 0) {
      if (idx != k || d != 0 || cnt[k])
        rc = bench_fail(c,
                        "subscriber %" PRIu64 " shows the load's value "
                        "after %u completed updates",
                        k, cnt[k]);
      continue;
    }
    unsigned t = who - 1;
    if (t >= nt || idx > bench_done(t) || bench_op_at(t, idx).key != k) {
      rc = bench_fail(c,
                      "subscriber %" PRIu64 " shows thread %u op %" PRIu64
                      ", which never updated it",
                      k, t, idx);
      continue;
    }
    int shows_inflight = idx == bench_done(t);
    uint64_t dmax = nt > 1 ? SEQ_MASK / 2 /* i.e. not negative */
                           : (uint64_t)shows_inflight;
    if (d > dmax || (shows_inflight && d == 0))
      rc = bench_fail(c,
                      "subscriber %" PRIu64 ": %" PRIu64 " updates "
                      "reached it, %u completed",
                      k, (v >> SEQ_SHIFT), cnt[k]);
  }
  free(seen);
  free(cnt);
  return rc;
}

static const struct bench_workload tatp = {
    .name = "tatp",
    .root_size = sizeof(struct root),
    .own_compare = 1,
    .op_name = "update_location",
    .init = tatp_init,
    .attach = tatp_attach,
    .op = tatp_op,
    .check = tatp_check,
};
BENCH_WORKLOAD(tatp);
