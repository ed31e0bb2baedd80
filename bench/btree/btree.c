/* SPDX-License-Identifier: Apache-2.0 */
/*
 * btree.c -- the B+-tree workload (YCSB-A style: 50:50 reads and updates of
 * uniformly drawn keys, values of --value-size bytes), one source for every
 * variant of bench/common/bench.h. Nodes are 256 bytes (four cache lines):
 * up to 15 keys with 16 children, or in a leaf 15 value pointers and the
 * pointer to the next leaf. An update writes the new value into a fresh
 * block and swaps the leaf's pointer (the commit, one 8-byte store), as the
 * hash map does. An insert (the load phase) puts the key into its leaf and
 * splits full nodes bottom-up, logging with PM_UNDO each existing node it
 * changes, so the whole insert commits or rolls back with the driver's
 * operation counter. Locks are 16 stripes by key: a read or an update takes
 * its key's stripe, an insert takes all of them (see "locking").
 */
#include <string.h>

#include "bench.h"

#define MAXK 15                   /* keys per node                        */
#define MIN_LEAF ((MAXK + 1) / 2) /* keys in a leaf other than the root   */
#define MIN_INNER (MAXK / 2)      /* keys in an inner node but the root   */
#define MAX_HEIGHT 24             /* levels; 8^24 keys is far beyond need  */
#define NSTRIPES 16

struct node {
  uint32_t leaf; /* 1 for a leaf, 0 for an inner node */
  uint32_t n;    /* keys in use */
  uint64_t key[MAXK];
  union {
    /* Inner: child[i] holds the keys in [key[i-1], key[i]). */
    struct node *child[MAXK + 1];
    struct {
      void *val[MAXK];   /* the value block of key[i] */
      struct node *next; /* the leaf to the right, NULL for the last */
    };
  };
};
_Static_assert(sizeof(struct node) == 256, "a node is four cache lines");

struct root {
  struct node *top;
};

/* ---- locking ------------------------------------------------------------- */

/* The tree's shape changes only in inserts, so the stripes act as one
 * reader-writer lock made of mutexes: a read or update of key k holds
 * stripe[k's hash] (which keeps others off k's leaf slot and off its value
 * block until that block is freed), and an insert holds every stripe, in
 * order, so nobody else walks the tree while it shifts and splits nodes.
 * Only bench_lock mutexes are used because their release is deferred to the
 * operation's commit in the persistent variants: no thread updates a slot
 * in a node whose split could still be rolled back, and no insert logs a
 * slot whose update could still be rolled back. Updates of different keys
 * in one leaf run at once: each writes a word of its own. */
static struct {
  _Alignas(64) bench_lock l; /* a line each: no false sharing */
} stripe[NSTRIPES];

static bench_lock *stripe_of(uint64_t key) {
  return &stripe[bench_mix64(key ^ 0x452821e638d01377ull) % NSTRIPES].l;
}

static void lock_all(void) {
  for (unsigned i = 0; i < NSTRIPES; i++)
    bench_lock_acquire(&stripe[i].l);
}

static void unlock_all(void) {
  for (unsigned i = 0; i < NSTRIPES; i++)
    bench_lock_release(&stripe[i].l);
}

static int bt_attach(void *rootp) {
  (void)rootp;
  for (unsigned i = 0; i < NSTRIPES; i++)
    bench_lock_init(&stripe[i].l);
  return 0;
}

static int bt_init(void *rootp) {
  struct root *r = rootp;
  struct node *leaf = pm_alloc(sizeof *leaf);
  if (!leaf)
    return -1;
  leaf->leaf = 1;
  PM_PERSIST(leaf, sizeof *leaf);
  PM_TX_ADD(&r->top, sizeof r->top);
  r->top = leaf;
  PM_PERSIST(&r->top, sizeof r->top);
  return 0;
}

/* The number of keys in x not above key: the child to descend to in an
 * inner node; in a leaf, key is at index i - 1 if present, else goes at i. */
static unsigned upper(const struct node *x, uint64_t key) {
  unsigned lo = 0, hi = x->n;
  while (lo < hi) {
    unsigned m = (lo + hi) / 2;
    if (x->key[m] <= key)
      lo = m + 1;
    else
      hi = m;
  }
  return lo;
}

/* The leaf slot holding key's value, or NULL. */
static void **find(const struct root *r, uint64_t key) {
  struct node *x = r->top;
  while (!x->leaf)
    x = x->child[upper(x, key)];
  unsigned i = upper(x, key);
  return i && x->key[i - 1] == key ? &x->val[i - 1] : NULL;
}

/* ---- inserts ------------------------------------------------------------- */

/* put and split write an entry (k, p) at index i of x: in a leaf the key
 * and its value; in an inner node a separator and the child to its right,
 * which came from splitting child[i]. The caller has logged x; a sibling s
 * is fresh. Slots beyond n are cleared, so no stale pointer outlives its
 * block. */
static void put(struct node *x, unsigned i, uint64_t k, void *p) {
  unsigned n = x->n, c = !x->leaf; /* an inner node's pointers are at i+1 */
  memmove(&x->key[i + 1], &x->key[i], (n - i) * sizeof x->key[0]);
  memmove(&x->child[i + c + 1], &x->child[i + c], (n - i) * sizeof(void *));
  x->key[i] = k;
  x->child[i + c] = p;
  x->n = n + 1;
}

/* Split the full node x around the new entry (k, p) at i into x and s;
 * returns the separator that goes up: a leaf's right half keeps it as its
 * first key, an inner node's middle key moves up. */
static uint64_t split(struct node *x, struct node *s, unsigned i, uint64_t k,
                      void *p) {
  uint64_t key[MAXK + 1];
  void *ptr[MAXK + 2];
  unsigned c = !x->leaf, nleft = (MAXK + 1) / 2;
  memcpy(key, x->key, i * sizeof key[0]);
  key[i] = k;
  memcpy(&key[i + 1], &x->key[i], (MAXK - i) * sizeof key[0]);
  memcpy(ptr, x->child, (i + c) * sizeof ptr[0]);
  ptr[i + c] = p;
  memcpy(&ptr[i + c + 1], &x->child[i + c], (MAXK - i) * sizeof ptr[0]);

  unsigned sk = nleft + c; /* the right half's first key */
  s->leaf = x->leaf;
  s->n = MAXK + 1 - sk;
  memcpy(s->key, &key[sk], s->n * sizeof key[0]);
  memcpy(s->child, &ptr[sk], (s->n + c) * sizeof ptr[0]);
  if (x->leaf) {
    s->next = x->next;
    x->next = s;
  }
  x->n = nleft;
  memcpy(x->key, key, nleft * sizeof key[0]);
  memset(&x->key[nleft], 0, (MAXK - nleft) * sizeof key[0]);
  memcpy(x->child, ptr, (nleft + c) * sizeof ptr[0]);
  memset(&x->child[nleft + c], 0, (MAXK - nleft) * sizeof ptr[0]);
  return key[nleft];
}

/* Insert key (absent) with value v. Nodes for every split are allocated
 * first, so a failure changes nothing. Each existing node is logged once,
 * before its first change; fresh nodes are flushed here and the driver's
 * commit fences them with the logged ranges. Under pmdk PM_UNDO snapshots
 * the same ranges in the transaction, and fresh nodes come from it. */
static int insert(struct root *r, uint64_t key, void *v) {
  struct node *path[MAX_HEIGHT], *fresh[MAX_HEIGHT + 1];
  unsigned at[MAX_HEIGHT], d = 0;
  for (struct node *x = r->top;; x = x->child[at[d++]]) {
    if (d == MAX_HEIGHT)
      return -1;
    path[d] = x;
    at[d] = upper(x, key);
    if (x->leaf)
      break;
  }
  unsigned full = 0; /* the nodes that split: the full ones at the bottom */
  while (full <= d && path[d - full]->n == MAXK)
    full++;
  for (unsigned j = 0; j < full + (full > d); j++)
    if (!(fresh[j] = pm_alloc(sizeof(struct node)))) {
      while (j--)
        pm_free(fresh[j]);
      return -1;
    }

  uint64_t k = key;
  void *p = v;
  for (unsigned j = 0; j <= d; j++) {
    struct node *x = path[d - j];
    PM_UNDO(x, sizeof *x);
    if (j == full) {
      put(x, at[d - j], k, p);
      return 0;
    }
    k = split(x, fresh[j], at[d - j], k, p);
    PM_FLUSH(fresh[j], sizeof *fresh[j]);
    p = fresh[j];
  }
  /* The root split: a new root above the old one and its sibling. */
  struct node *t = fresh[full];
  t->n = 1;
  t->key[0] = k;
  t->child[0] = r->top;
  t->child[1] = p;
  PM_FLUSH(t, sizeof *t);
  PM_UNDO(&r->top, sizeof r->top);
  r->top = t;
  return 0;
}

/* ---- operations ---------------------------------------------------------- */

/* Commit points, and why a crash anywhere leaves a state --check accepts.
 * An update (or an insert of a present key) commits with the 8-byte store
 * that swaps the leaf slot to the new value block. The block is durable
 * before the swap (flush, fence), so the slot names a well-formed value
 * whether the swap persisted or not. hand-adr persists the slot before the
 * driver persists the counter (hand-eadr: stores persist in program order),
 * so a counter that counts the update implies its value; under pmdk the
 * slot is snapshotted and the transaction decides. The old block is freed
 * only after the commit (deferred by the driver, or transactional), so a
 * crash at worst leaks it.
 * An insert of a new key commits with the driver's commit. Every existing
 * node it changes, and the root pointer, is logged before its first
 * change, and fresh nodes are reachable only through logged ranges. Hand
 * variants: until the store that empties the undo log (which holds the
 * counter too), recovery restores every logged range, which gives the tree
 * before the insert with its fresh nodes unreferenced (leaked); after it,
 * every logged range and fresh node has been written back and fenced.
 * pmdk: the transaction does the same. */
static int bt_op(void *rootp, unsigned tid, const struct bench_op *op,
                 void *scratch) {
  struct root *r = rootp;
  size_t size = bench_cfg->value_size;
  bench_lock *l = stripe_of(op->key);
  (void)tid;
  if (op->kind == BENCH_READ) {
    bench_lock_acquire(l);
    void **slot = find(r, op->key);
    if (slot)
      memcpy(scratch, *slot, size);
    bench_lock_release(l);
    return slot ? 0 : -1;
  }
  if (op->kind != BENCH_UPDATE && op->kind != BENCH_INSERT)
    return -1;
  void *v = bench_new_value(op->key, op->stamp, scratch);
  if (!v)
    return -1;
  PM_FENCE(); /* durable before a swap publishes it */

  int all = op->kind == BENCH_INSERT, rc = 0;
  if (all)
    lock_all();
  else
    bench_lock_acquire(l);
  void **slot = find(r, op->key);
  if (slot) { /* also an insert of a present key (a load insert re-run) */
    void *old = *slot;
    PM_TX_ADD(slot, sizeof *slot);
    *slot = v; /* the commit */
    PM_PERSIST(slot, sizeof *slot);
    pm_free(old);
  } else {
    rc = all ? insert(r, op->key, v) : -1;
  }
  if (all)
    unlock_all();
  else
    bench_lock_release(l);
  if (rc)
    pm_free(v);
  return rc;
}

/* ---- the check ----------------------------------------------------------- */

struct walk {
  struct bench_check *c;
  int leaf_depth;          /* of the first leaf; every leaf must match */
  const struct node *prev; /* the leaf before, in key order */
  uint64_t nodes, max;     /* visited, and more than a sound tree has */
};

/* Verify the subtree x at depth, whose keys must lie in [lo, hi), and report
 * its keys in order. */
static int walk(struct walk *w, const struct node *x, int depth, uint64_t lo,
                uint64_t hi) {
  struct bench_check *c = w->c;
  if (!x)
    return bench_fail(c, "a null child at depth %d", depth);
  if (depth >= MAX_HEIGHT || ++w->nodes > w->max)
    return bench_fail(c,
                      "more levels or nodes than a tree of %llu keys has: "
                      "a cycle or a shared subtree",
                      (unsigned long long)bench_cfg->keys);
  unsigned min = depth ? (x->leaf ? MIN_LEAF : MIN_INNER) : !x->leaf;
  if (x->leaf > 1 || x->n < min || x->n > MAXK)
    return bench_fail(c, "a node at depth %d holds %u keys (leaf %u)", depth,
                      x->n, x->leaf);
  for (unsigned i = 0; i < x->n; i++)
    if (x->key[i] < lo || x->key[i] >= hi || (i && x->key[i] <= x->key[i - 1]))
      return bench_fail(c,
                        "key %llu at depth %d is out of order or outside "
                        "[%llu, %llu)",
                        (unsigned long long)x->key[i], depth,
                        (unsigned long long)lo, (unsigned long long)hi);
  if (!x->leaf) {
    for (unsigned i = 0; i <= x->n; i++)
      if (walk(w, x->child[i], depth + 1, i ? x->key[i - 1] : lo,
               i < x->n ? x->key[i] : hi))
        return -1;
    return 0;
  }
  if (w->leaf_depth < 0)
    w->leaf_depth = depth;
  if (depth != w->leaf_depth)
    return bench_fail(c, "leaves at depths %d and %d", w->leaf_depth, depth);
  if (w->prev && w->prev->next != x)
    return bench_fail(c, "the leaf chain skips the leaf of key %llu",
                      (unsigned long long)x->key[0]);
  w->prev = x;
  for (unsigned i = 0; i < x->n; i++) {
    if (bench_found_value(c, x->key[i], x->val[i]))
      return -1;
  }
  return 0;
}

static int bt_check(void *rootp, struct bench_check *c) {
  struct root *r = rootp;
  struct walk w = {c, -1, NULL, 0, bench_cfg->keys + 2};
  if (walk(&w, r->top, 0, 0, UINT64_MAX))
    return -1;
  if (w.prev->next)
    return bench_fail(c, "the last leaf has a successor");
  return 0;
}

static const struct bench_workload btree = {
    .name = "btree",
    .root_size = sizeof(struct root),
    .set = 0,
    .init = bt_init,
    .attach = bt_attach,
    .op = bt_op,
    .check = bt_check,
};
BENCH_WORKLOAD(btree);
