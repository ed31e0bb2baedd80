/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harris.c -- the lock-free sorted linked list workload (Harris, DISC'01):
 * a set of keys in [0, keys), 1024 by default, with 80:20 reads and
 * inserts/deletes, as in the lock-free part of SSAPP's evaluation. The list
 * itself is hlist.h, shared with lfhash; how each variant makes its links
 * durable (link-and-persist for hand-adr, Mirror-style replicas for pmdk,
 * nothing for eADR) is lfword.h. Operations run outside transactions even
 * under pmdk (notx): a CAS is the commit point of each, so a crash leaves
 * every key as the completed operations left it, except the key of an
 * operation in flight, which may go either way. The check walks the
 * persistent list: sorted, in range, each unmarked key reported once.
 */
#include "hlist.h"

struct root {
  lf_word head; /* the first node, or 0 */
};

static int harris_init(void *rootp) {
  (void)rootp; /* the zeroed root is the empty list */
  return 0;
}

/* pmdk: map the volatile replica and, on a reopened pool, fill it. */
static int harris_attach(void *rootp) {
  struct root *r = rootp;
  if (lf_mirror_map())
    return -1;
  lf_mirror(r, sizeof *r);
#ifdef BENCH_PMDK
  return hl_mirror(&r->head);
#else
  return 0;
#endif
}

static int harris_op(void *rootp, unsigned tid, const struct bench_op *op,
                     void *scratch) {
  struct root *r = rootp;
  (void)tid;
  (void)scratch;
  switch (op->kind) {
  case BENCH_INSERT:
    return hl_insert(&r->head, op->key, op->stamp);
  case BENCH_DELETE:
    hl_delete(&r->head, op->key);
    return 0;
  default:
    (void)hl_contains(&r->head, op->key);
    return 0;
  }
}

static int harris_check(void *rootp, struct bench_check *c) {
  struct root *r = rootp;
  return hl_check(&r->head, c, NULL, NULL);
}

static const struct bench_workload harris = {
    .name = "harris",
    .root_size = sizeof(struct root),
    .set = 1,
    .notx = 1,
    .read_pct = 80,
    .init = harris_init,
    .attach = harris_attach,
    .op = harris_op,
    .check = harris_check,
};
BENCH_WORKLOAD(harris);
