/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hashmap.c -- the chained hash map workload (YCSB-A style: 50:50 reads and
 * updates of uniformly drawn keys, values of --value-size bytes), one source
 * for every variant of bench/common/bench.h. Buckets are an array of node
 * pointers in PM with one DRAM lock each. A node holds its key and a
 * pointer to its value block; an update writes the new value into a fresh
 * block, makes it durable, then swaps the node's pointer (the commit, one
 * 8-byte store) and frees the old block, so a crash leaves either value.
 * An insert makes the node durable before linking it at the bucket's head;
 * an insert of a key already there (a load insert repeated after a crash)
 * updates it.
 * Readers copy the value under the bucket lock, so a freed block is never
 * read.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct node {
  uint64_t key;
  struct node *next;
  void *val;
};

struct root {
  uint64_t nbuckets; /* a power of two */
  struct node **bucket;
};

static bench_lock *locks; /* DRAM, one per bucket */

static uint64_t bucket_of(const struct root *r, uint64_t key) {
  return bench_mix64(key ^ 0x243f6a8885a308d3ull) & (r->nbuckets - 1);
}

static int hm_init(void *rootp) {
  struct root *r = rootp;
  uint64_t n = 1;
  while (n < bench_cfg->keys)
    n <<= 1;
  PM_TX_ADD(r, sizeof *r);
  r->bucket = pm_alloc(n * sizeof *r->bucket);
  if (!r->bucket)
    return -1;
  PM_PERSIST(r->bucket, n * sizeof *r->bucket);
  r->nbuckets = n;
  PM_PERSIST(r, sizeof *r);
  return 0;
}

static int hm_attach(void *rootp) {
  struct root *r = rootp;
  uint64_t n = 1;
  while (n < bench_cfg->keys)
    n <<= 1;
  (void)r;
  return bench_locks_init(&locks, n);
}

static struct node *find(struct root *r, uint64_t b, uint64_t key) {
  struct node *n = r->bucket[b];
  while (n && n->key != key)
    n = n->next;
  return n;
}

static int hm_op(void *rootp, unsigned tid, const struct bench_op *op,
                 void *scratch) {
  struct root *r = rootp;
  uint64_t b = bucket_of(r, op->key);
  (void)tid;
  if (op->kind == BENCH_READ) {
    bench_lock_acquire(&locks[b]);
    struct node *n = find(r, b, op->key);
    if (n)
      memcpy(scratch, n->val, bench_cfg->value_size);
    bench_lock_release(&locks[b]);
    return n ? 0 : -1;
  }
  void *v = bench_new_value(op->key, op->stamp, scratch);
  if (!v)
    return -1;
  struct node *fresh = NULL;
  if (op->kind == BENCH_INSERT && !(fresh = pm_alloc(sizeof *fresh)))
    return -1;
  PM_FENCE(); /* the new value is durable before it is published */
  bench_lock_acquire(&locks[b]);
  struct node *n = find(r, b, op->key);
  if (fresh && !n) {
    fresh->key = op->key;
    fresh->val = v;
    fresh->next = r->bucket[b];
    PM_PERSIST(fresh, sizeof *fresh);
    PM_TX_ADD(&r->bucket[b], sizeof r->bucket[b]);
    r->bucket[b] = fresh; /* the commit */
    PM_PERSIST(&r->bucket[b], sizeof r->bucket[b]);
    bench_lock_release(&locks[b]);
    return 0;
  }
  pm_free(fresh); /* an insert of a present key updates it */
  void *old = n ? n->val : NULL;
  if (n) {
    PM_TX_ADD(&n->val, sizeof n->val);
    n->val = v; /* the commit */
    PM_PERSIST(&n->val, sizeof n->val);
  }
  bench_lock_release(&locks[b]);
  pm_free(n ? old : v);
  return n ? 0 : -1;
}

static int hm_check(void *rootp, struct bench_check *c) {
  struct root *r = rootp;
  if (!r->bucket || r->nbuckets == 0 || (r->nbuckets & (r->nbuckets - 1)))
    return bench_fail(c, "the bucket array is missing or malformed");
  uint64_t seen = 0, keys = bench_cfg->keys;
  for (uint64_t b = 0; b < r->nbuckets; b++)
    for (struct node *n = r->bucket[b]; n; n = n->next) {
      if (++seen > keys)
        return bench_fail(c, "more nodes than keys: a cycle or duplicates");
      if (n->key >= keys || bucket_of(r, n->key) != b)
        return bench_fail(c,
                          "bucket %llu holds key %llu, which hashes "
                          "elsewhere",
                          (unsigned long long)b, (unsigned long long)n->key);
      if (bench_found_value(c, n->key, n->val))
        return -1;
    }
  return 0;
}

static const struct bench_workload hashmap = {
    .name = "hashmap",
    .root_size = sizeof(struct root),
    .set = 0,
    .init = hm_init,
    .attach = hm_attach,
    .op = hm_op,
    .check = hm_check,
};
BENCH_WORKLOAD(hashmap);
