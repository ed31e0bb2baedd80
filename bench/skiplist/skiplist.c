/* SPDX-License-Identifier: Apache-2.0 */
/*
 * skiplist.c -- the skip list workload (50:50 reads and updates of uniformly
 * drawn keys, values of --value-size bytes), one source for every variant
 * of bench/common/bench.h. A node holds its key, a pointer to its value
 * block and a tower of next pointers whose height is drawn from the
 * operation, so a run is reproducible. Locking is striped by key: a read
 * or an update takes its key's stripe, which keeps the links still while
 * it walks, and an insert, which relinks towers across keys, takes every
 * stripe. An update writes the new value into a fresh block, makes it
 * durable, then swaps the node's pointer (one 8-byte store); an insert
 * logs every existing link it changes with PM_UNDO, so a tower is linked
 * on all its levels or on none.
 */
#include <stddef.h>
#include <string.h>

#include "bench.h"

/* Towers are geometric with p = 1/2: 32 levels serve the driver's 2^32
 * keys. */
#define MAX_LEVEL 32
/* Lock stripes: an insert holds all of them until its commit, and the
 * driver defers up to 64 releases per operation. */
#define STRIPES 32

struct node {
  uint64_t key;
  void *val;
  uint64_t height;     /* on levels 0..height-1 */
  struct node *next[]; /* [height] */
};

struct root {
  struct node *head[MAX_LEVEL]; /* a next array like a node's */
};

static bench_lock stripe[STRIPES]; /* DRAM */

static int sl_init(void *rootp) {
  (void)rootp; /* the zeroed root is the empty list */
  return 0;
}

static int sl_attach(void *rootp) {
  (void)rootp;
  for (unsigned i = 0; i < STRIPES; i++)
    if (bench_lock_init(&stripe[i]))
      return -1;
  return 0;
}

/* The tower height of a new node, from the operation: the load's inserts
 * carry no random bits, so the key and the seed are mixed in. */
static unsigned height_of(const struct bench_op *op) {
  uint64_t h = bench_mix64(op->rnd ^ bench_mix64(op->key ^ bench_cfg->seed));
  return 1 + (unsigned)__builtin_ctzll(h | 1ull << (MAX_LEVEL - 1));
}

/* The node holding key, or NULL. With prev, prev[i] is the slot on level i
 * that key's node hangs from (or would). */
static struct node *find(struct root *r, uint64_t key, struct node ***prev) {
  struct node **next = r->head, *x;
  for (int i = MAX_LEVEL - 1; i >= 0; i--) {
    while ((x = next[i]) && x->key < key)
      next = x->next;
    if (prev)
      prev[i] = &next[i];
  }
  x = next[0];
  return x && x->key == key ? x : NULL;
}

/* Link the fresh node on its levels after the slots in prev. */
static void link_tower(struct node ***prev, struct node *fresh) {
  unsigned h = (unsigned)fresh->height;
  for (unsigned i = 0; i < h; i++)
    fresh->next[i] = *prev[i];
  /* The driver flushes the logged slots at the commit; the fresh node is
   * ours to flush, and its fence is the commit's. */
  PM_FLUSH(fresh, offsetof(struct node, next) + h * sizeof fresh->next[0]);
  /* Log the slots before the first write; the slots of one predecessor on
   * consecutive levels are adjacent, and are logged as one range. */
  for (unsigned i = 0, j; i < h; i = j) {
    for (j = i + 1; j < h && prev[j] == prev[j - 1] + 1; j++)
      ;
    PM_UNDO(prev[i], (j - i) * sizeof *prev[i]);
  }
  for (unsigned i = 0; i < h; i++)
    *prev[i] = fresh;
}

/* Where each operation commits, and why a crash anywhere is recoverable:
 * - update (and an insert of a present key): the new value block is
 *   unreachable until the node's 8-byte pointer store; hand-adr flushes and
 *   fences the block before that store and persists the store after it, so
 *   the pointer never reaches PM ahead of the bytes it points at (hand-eadr:
 *   stores are durable in program order, the fence keeps the compiler from
 *   reordering them). A crash before the store leaves the old value, after
 *   it the new one with the counter at most one behind: the in-flight
 *   operation either did or did not happen. The old block is freed only
 *   once the operation has committed (the driver defers pm_free).
 * - insert: every slot it relinks is in the undo log before its first
 *   write; the commit is the driver's, the one store that empties the log
 *   after it has written back the logged slots (and, ordered by the same
 *   fence, the fresh node flushed here) together with the load cursor. A
 *   crash before it rolls every slot back, which unlinks the whole tower
 *   (the fresh node leaks, the pool's gc reclaims it).
 * - pmdk: the operation is the driver's transaction; PM_UNDO and PM_TX_ADD
 *   snapshot what it writes, fresh blocks are transactional allocations.
 * - read: writes nothing.
 * Stripe releases are deferred until the commit (two-phase locking), so no
 * other thread reads or builds on a write that a crash could still roll
 * back. */
static int sl_op(void *rootp, unsigned tid, const struct bench_op *op,
                 void *scratch) {
  struct root *r = rootp;
  size_t size = bench_cfg->value_size;
  unsigned own = (unsigned)(op->key % STRIPES);
  (void)tid;
  if (op->kind == BENCH_READ) {
    bench_lock_acquire(&stripe[own]);
    struct node *n = find(r, op->key, NULL);
    if (n)
      memcpy(scratch, n->val, size);
    bench_lock_release(&stripe[own]);
    return n ? 0 : -1;
  }
  void *v = bench_new_value(op->key, op->stamp, scratch);
  struct node *fresh = NULL;
  if (!v)
    return -1;
  if (op->kind == BENCH_INSERT) {
    unsigned h = height_of(op);
    if (!(fresh = pm_alloc(sizeof *fresh + h * sizeof fresh->next[0])))
      return -1;
    fresh->key = op->key;
    fresh->val = v;
    fresh->height = h;
  }
  PM_FENCE(); /* the value is durable before anything points at it */
  /* Every stripe, in order, for an insert: no walk may see links move. */
  unsigned lo = fresh ? 0 : own, hi = fresh ? STRIPES : own + 1;
  for (unsigned i = lo; i < hi; i++)
    bench_lock_acquire(&stripe[i]);
  struct node **prev[MAX_LEVEL];
  struct node *n = find(r, op->key, fresh ? prev : NULL);
  int rc = 0;
  if (n) { /* an update, or an insert the load phase repeats */
    void *old = n->val;
    PM_TX_ADD(&n->val, sizeof n->val);
    n->val = v; /* the commit */
    PM_PERSIST(&n->val, sizeof n->val);
    v = old;
  } else if (fresh) {
    link_tower(prev, fresh);
    v = fresh = NULL;
  } else {
    rc = -1; /* an update of a missing key */
  }
  for (unsigned i = lo; i < hi; i++)
    bench_lock_release(&stripe[i]);
  pm_free(v);
  pm_free(fresh);
  return rc;
}

/* Level 0 holds every node once, in key order, each with a tower height
 * in bounds and a well-formed value; every level above holds exactly the
 * nodes of the level below that are tall enough, in the same order. */
static int sl_check(void *rootp, struct bench_check *c) {
  struct root *r = rootp;
  const struct node *prev = NULL;
  for (const struct node *x = r->head[0]; x; prev = x, x = x->next[0]) {
    if ((prev && x->key <= prev->key) || x->key >= bench_cfg->keys)
      return bench_fail(c, "level 0: key %llu is out of order or range",
                        (unsigned long long)x->key);
    if (x->height < 1 || x->height > MAX_LEVEL)
      return bench_fail(c, "key %llu: tower height %llu",
                        (unsigned long long)x->key,
                        (unsigned long long)x->height);
    if (bench_found_value(c, x->key, x->val))
      return -1;
  }
  for (unsigned i = 1; i < MAX_LEVEL; i++) {
    const struct node *up = r->head[i];
    for (const struct node *x = r->head[i - 1]; x; x = x->next[i - 1]) {
      if (x->height <= i)
        continue;
      if (up != x)
        return bench_fail(c, "level %u: key %llu is missing or misplaced", i,
                          (unsigned long long)x->key);
      up = up->next[i];
    }
    if (up)
      return bench_fail(c, "level %u: key %llu is not on level %u", i,
                        (unsigned long long)up->key, i - 1);
  }
  return 0;
}

static const struct bench_workload skiplist = {
    .name = "skiplist",
    .root_size = sizeof(struct root),
    .set = 0,
    .init = sl_init,
    .attach = sl_attach,
    .op = sl_op,
    .check = sl_check,
};
BENCH_WORKLOAD(skiplist);
