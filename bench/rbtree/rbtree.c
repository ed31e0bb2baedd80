/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rbtree.c -- the red-black tree workload (50:50 reads and updates of
 * uniformly drawn keys, values of --value-size bytes), one source for every
 * variant of bench/common/bench.h. One DRAM lock guards the whole tree, as
 * in the papers this suite follows. Nodes keep no parent pointers: an insert
 * remembers its path down in DRAM, which also keeps the number of PM nodes
 * a rebalance writes (and logs) small. A node points at its value block; an
 * update writes the new value into a fresh block, makes it durable, then
 * swaps the node's pointer (the commit, one 8-byte store) and frees the old
 * block, so a crash leaves either value. An insert (the load phase) links a
 * fresh red node and recolours and rotates its way up; every existing node
 * it changes is logged with PM_UNDO first, so the whole rebalance commits
 * with the operation or rolls back with it.
 */
#include <string.h>

#include "bench.h"

/* A red-black tree of n keys is at most 2 log2(n + 1) deep, and the driver
 * allows at most 2^32 keys: 66 levels leave no path longer. */
#define MAX_DEPTH 66

struct node {
  uint64_t key;
  uint64_t red;          /* 1 red, 0 black */
  struct node *child[2]; /* [0] smaller keys, [1] larger keys */
  void *val;
};

struct root {
  struct node *top;
};

static bench_lock tree_lock; /* DRAM */

static int rb_init(void *rootp) {
  (void)rootp; /* the zeroed root is the empty tree */
  return 0;
}

static int rb_attach(void *rootp) {
  (void)rootp;
  return bench_lock_init(&tree_lock) ? -1 : 0;
}

/* The ranges this insert has logged already: a rebalance may write a node
 * several times, and one entry restores it (each PM_UNDO costs the log a
 * durable write). */
struct logged {
  const void *p[2 * MAX_DEPTH + 8];
  unsigned n;
};

static void undo(struct logged *l, void *p, size_t size) {
  for (unsigned i = 0; i < l->n; i++)
    if (l->p[i] == p)
      return;
  if (l->n < sizeof l->p / sizeof l->p[0])
    l->p[l->n++] = p; /* when full, logging again is merely slower */
  PM_UNDO(p, size);
}

/* The slot that points at path[i] (logged, ready to be written). */
static struct node **slot_of(struct root *r, struct node **path, unsigned i,
                             struct logged *l) {
  if (i == 0) {
    undo(l, &r->top, sizeof r->top);
    return &r->top;
  }
  struct node *up = path[i - 1];
  undo(l, up, sizeof *up);
  return &up->child[up->child[1] == path[i]];
}

/* Rotate a, which *slot points at, towards side d: its child on the other
 * side takes its place. Returns that child. */
static struct node *rotate(struct node **slot, struct node *a, int d,
                           struct logged *l) {
  struct node *b = a->child[!d];
  undo(l, a, sizeof *a);
  undo(l, b, sizeof *b);
  a->child[!d] = b->child[d];
  b->child[d] = a;
  *slot = b;
  return b;
}

/* Link the fresh red node below path[depth - 1] (path[0] is the root) and
 * restore the red-black properties bottom-up. */
static void insert_fix(struct root *r, struct node **path, unsigned depth,
                       struct node *fresh) {
  /* The fresh node counts as logged: it is not logged, only flushed. */
  struct logged l = {{fresh}, 1};
  struct node *x = fresh, *p = NULL;
  unsigned i = depth; /* x's place on the path */
  if (depth) {
    p = path[depth - 1];
    undo(&l, p, sizeof *p);
    p->child[x->key > p->key] = x;
  } else {
    undo(&l, &r->top, sizeof r->top);
    r->top = x;
  }
  while (p && p->red) { /* a red parent is never the root: i >= 2 */
    struct node *g = path[i - 2];
    int pd = g->child[1] == p;
    struct node *u = g->child[!pd];
    if (u && u->red) { /* push the red up and go on from g */
      undo(&l, p, sizeof *p);
      undo(&l, u, sizeof *u);
      undo(&l, g, sizeof *g);
      p->red = u->red = 0;
      g->red = 1;
      x = g;
      i -= 2;
      p = i ? path[i - 1] : NULL;
      continue;
    }
    undo(&l, g, sizeof *g);
    if ((p->child[1] == x) != pd) /* x is an inner grandchild */
      p = rotate(&g->child[pd], p, pd, &l);
    rotate(slot_of(r, path, i - 2, &l), g, !pd, &l);
    p->red = 0; /* p now sits where g did, g below it */
    g->red = 1;
    break;
  }
  if (r->top->red) {
    undo(&l, r->top, sizeof *r->top);
    r->top->red = 0;
  }
  /* The driver flushes the logged ranges at the commit; the fresh node is
   * ours to flush, and its fence is the commit's. */
  PM_FLUSH(fresh, sizeof *fresh);
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
 * - insert: every existing node or slot the rebalance writes is in the undo
 *   log before its first write; the commit is the driver's, the one store
 *   that empties the log after it has written back the logged ranges (and,
 *   ordered by the same fence, the fresh node flushed here) together with
 *   the load cursor. A crash before it rolls every logged range back, which
 *   unlinks the fresh node (it leaks, the pool's gc reclaims it).
 * - pmdk: the operation is the driver's transaction; PM_UNDO and PM_TX_ADD
 *   snapshot what it writes, fresh blocks are transactional allocations.
 * - read: writes nothing.
 * The tree lock's release is deferred until the commit, so no other thread
 * reads or builds on a write that a crash could still roll back. */
static int rb_op(void *rootp, unsigned tid, const struct bench_op *op,
                 void *scratch) {
  struct root *r = rootp;
  size_t size = bench_cfg->value_size;
  (void)tid;
  if (op->kind == BENCH_READ) {
    bench_lock_acquire(&tree_lock);
    struct node *n = r->top;
    while (n && n->key != op->key)
      n = n->child[op->key > n->key];
    if (n)
      memcpy(scratch, n->val, size);
    bench_lock_release(&tree_lock);
    return n ? 0 : -1;
  }
  void *v = bench_new_value(op->key, op->stamp, scratch);
  struct node *fresh = NULL;
  if (!v)
    return -1;
  if (op->kind == BENCH_INSERT) {
    if (!(fresh = pm_alloc(sizeof *fresh)))
      return -1;
    fresh->key = op->key;
    fresh->red = 1;
    fresh->val = v;
  }
  PM_FENCE(); /* the value is durable before anything points at it */
  bench_lock_acquire(&tree_lock);
  struct node *path[MAX_DEPTH], *n = r->top;
  unsigned depth = 0;
  while (n && n->key != op->key && depth < MAX_DEPTH) {
    path[depth++] = n;
    n = n->child[op->key > n->key];
  }
  int rc = 0;
  if (n) { /* an update, or an insert the load phase repeats */
    void *old = n->val;
    PM_TX_ADD(&n->val, sizeof n->val);
    n->val = v; /* the commit */
    PM_PERSIST(&n->val, sizeof n->val);
    v = old;
  } else if (fresh && depth < MAX_DEPTH) {
    insert_fix(r, path, depth, fresh);
    v = fresh = NULL;
  } else {
    rc = -1; /* an update of a missing key */
  }
  bench_lock_release(&tree_lock);
  pm_free(v);
  pm_free(fresh);
  return rc;
}

/* Check the subtree at n, whose keys must lie in [lo, hi): order, colours,
 * values. Returns its black height, or -1 after bench_fail. */
static int check_sub(struct node *n, uint64_t lo, uint64_t hi, unsigned depth,
                     struct bench_check *c) {
  if (!n)
    return 0;
  if (depth == MAX_DEPTH)
    return bench_fail(c, "the tree is deeper than %d levels", MAX_DEPTH);
  if (n->key < lo || n->key >= hi)
    return bench_fail(c, "key %llu is out of order (or out of range)",
                      (unsigned long long)n->key);
  if (n->red > 1)
    return bench_fail(c, "key %llu: colour %llu", (unsigned long long)n->key,
                      (unsigned long long)n->red);
  for (int d = 0; d < 2; d++)
    if (n->red && n->child[d] && n->child[d]->red)
      return bench_fail(c, "red key %llu has a red child",
                        (unsigned long long)n->key);
  if (bench_found_value(c, n->key, n->val))
    return -1;
  int bl = check_sub(n->child[0], lo, n->key, depth + 1, c);
  if (bl < 0)
    return -1;
  int br = check_sub(n->child[1], n->key + 1, hi, depth + 1, c);
  if (br < 0)
    return -1;
  if (bl != br)
    return bench_fail(c, "key %llu: black heights %d and %d below it",
                      (unsigned long long)n->key, bl, br);
  return bl + !n->red;
}

static int rb_check(void *rootp, struct bench_check *c) {
  struct root *r = rootp;
  if (r->top && r->top->red)
    return bench_fail(c, "the root is red");
  return check_sub(r->top, 0, bench_cfg->keys, 0, c) < 0 ? -1 : 0;
}

static const struct bench_workload rbtree = {
    .name = "rbtree",
    .root_size = sizeof(struct root),
    .set = 0,
    .init = rb_init,
    .attach = rb_attach,
    .op = rb_op,
    .check = rb_check,
};
BENCH_WORKLOAD(rbtree);
