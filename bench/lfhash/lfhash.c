/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lfhash.c -- the lock-free hash set workload: a fixed array of buckets,
 * each a Harris list (../harris/hlist.h, the same code as the harris
 * workload), with 80:20 reads and inserts/deletes of uniform keys. The
 * bucket count is fixed when the pool is made: the smallest power of two
 * >= keys / 2, one bucket per key the set holds on average (the load
 * inserts the even keys and the run keeps about half of them present), so
 * a list is about one node long and no resize is ever needed. The array of
 * head words lives in PM; each variant makes the links durable as
 * ../harris/lfword.h describes (link-and-persist for hand-adr, Mirror-style
 * replicas for pmdk), and each operation's commit point is the one CAS of
 * its bucket's list (hlist.h), so a crash leaves every key as the completed
 * operations left it, except the key of an operation in flight.
 */
#include "../harris/hlist.h"

struct root {
  uint64_t nbuckets; /* a power of two, >= keys / 2 */
  lf_word *bucket;   /* nbuckets list heads         */
};

static uint64_t buckets_for(uint64_t keys) {
  uint64_t n = 1;
  while (n < keys / 2)
    n <<= 1;
  return n;
}

static uint64_t bucket_of(uint64_t nbuckets, uint64_t key) {
  return bench_mix64(key ^ 0x452821e638d01377ull) & (nbuckets - 1);
}

static int lfh_init(void *rootp) {
  struct root *r = rootp;
  uint64_t n = buckets_for(bench_cfg->keys);
  lf_word *b = pm_alloc(n * sizeof *b);
  if (!b)
    return -1;
  lf_publish(b, n * sizeof *b); /* empty lists, durable before the root */
  PM_TX_ADD(r, sizeof *r);
  r->bucket = b;
  r->nbuckets = n;
  PM_PERSIST(r, sizeof *r);
  lf_mirror(r, sizeof *r);
  return 0;
}

/* pmdk: map the volatile replica and, on a reopened pool, fill it. */
static int lfh_attach(void *rootp) {
  if (lf_mirror_map())
    return -1;
#ifdef BENCH_PMDK
  struct root *r = rootp;
  lf_mirror(r, sizeof *r);
  if (!r->bucket)
    return 0; /* not made yet */
  lf_mirror(r->bucket, r->nbuckets * sizeof *r->bucket);
  for (uint64_t i = 0; i < r->nbuckets; i++)
    if (hl_mirror(&r->bucket[i]))
      return -1;
#else
  (void)rootp;
#endif
  return 0;
}

static int lfh_op(void *rootp, unsigned tid, const struct bench_op *op,
                  void *scratch) {
  struct root *r = lf_v((struct root *)rootp);
  lf_word *head = &r->bucket[bucket_of(r->nbuckets, op->key)];
  (void)tid;
  (void)scratch;
  switch (op->kind) {
  case BENCH_INSERT:
    return hl_insert(head, op->key, op->stamp);
  case BENCH_DELETE:
    hl_delete(head, op->key);
    return 0;
  default:
    (void)hl_contains(head, op->key);
    return 0;
  }
}

struct place {
  uint64_t nbuckets, b;
};

static int in_bucket(uint64_t key, void *arg) {
  const struct place *p = arg;
  return bucket_of(p->nbuckets, key) == p->b;
}

static int lfh_check(void *rootp, struct bench_check *c) {
  struct root *r = rootp;
  struct place p = {r->nbuckets, 0};
  if (!r->bucket || r->nbuckets != buckets_for(bench_cfg->keys))
    return bench_fail(c, "the bucket array is missing or malformed");
  for (; p.b < r->nbuckets; p.b++)
    if (hl_check(&r->bucket[p.b], c, in_bucket, &p))
      return -1;
  return 0;
}

static const struct bench_workload lfhash = {
    .name = "lfhash",
    .root_size = sizeof(struct root),
    .set = 1,
    .notx = 1,
    .read_pct = 80,
    .init = lfh_init,
    .attach = lfh_attach,
    .op = lfh_op,
    .check = lfh_check,
};
BENCH_WORKLOAD(lfhash);
