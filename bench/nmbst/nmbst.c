/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nmbst.c -- the lock-free external binary search tree of Natarajan and
 * Mittal (PPoPP'14) as a set workload: keys in [0, keys), 80:20 reads and
 * inserts/deletes. Keys live in leaves; an internal node routes smaller
 * keys left. Edges are link words (../harris/lfword.h, which also says how
 * each variant makes them durable) with two bits: FLAG on the edge to a
 * leaf being deleted, TAG on an edge that must no longer change because its
 * parent is being spliced out. Sentinels R, S and the leaves INF0 < INF1 <
 * INF2 above every key sit in the root, so the tree is never empty.
 *
 * A key is present while a leaf holding it is reachable (a flagged leaf
 * included). Commit points, each one lf_cas, durable when it returns:
 *   insert  the CAS that swings the parent's edge from the old leaf to a
 *           new internal node over it and the new leaf, both made durable
 *           before;
 *   delete  the CAS that splices the flagged leaf and its parent out (the
 *           deleting thread's, or a helper's that the deleter then sees
 *           settled). Flagging and tagging before it change no key's
 *           presence, and whoever meets a flagged or tagged edge, after a
 *           crash too, finishes the splice first, as for a stalled thread.
 * So a crash leaves every key as the completed operations left it, except
 * the keys of operations in flight. Nodes are never freed (no memory
 * reclamation), so a pointer read earlier still names the same node, and a
 * CAS is sound whenever its edge holds the expected node and bits, even if
 * the edge left it and came back meanwhile (pmdk's versions then make it
 * fail and retry). The check verifies the whole shape (two children or
 * none, leaf keys within the range their path allows, the INF0 leaf once,
 * FLAG only to a leaf, TAG only beside a FLAG) and reports each leaf once.
 */
#include <stdlib.h>

#include "../harris/lfword.h"

struct bnode {
  uint64_t key, stamp; /* immutable once linked; stamp: leaves only */
  lf_word left, right; /* both 0 in a leaf                          */
};
#define FLAG LF_BIT0
#define TAG LF_BIT1
#define INF0 (UINT64_MAX - 2)
#define INF1 (UINT64_MAX - 1)
#define INF2 UINT64_MAX

struct root {
  struct bnode r, s, l0, l1, l2; /* R(INF2) over S(INF1) over l0, l1; l2 */
};

/* The tree orders keys by a fixed scramble: the load inserts keys in
 * increasing order, which would leave an unbalanced tree a list, so the
 * order is a bijection of the low 32 bits (xorshifts and odd multipliers)
 * and the key itself rides in the low half. Tree keys are then distinct and
 * below INF0 for every key < 2^32 - 3. */
static uint64_t tkey(uint64_t key) {
  uint32_t x = (uint32_t)key;
  x ^= x >> 16;
  x *= 0x6a09e667u; /* odd: fractions of sqrt(2), sqrt(3) */
  x ^= x >> 15;
  x *= 0xbb67ae85u;
  x ^= x >> 16;
  return (uint64_t)x << 32 | key;
}

/* Where seek for a key ends: the leaf, its parent, and the last edge on
 * the path that was not tagged (ancestor -> successor), with the values
 * read from the two edges the CASes expect. */
struct seekrec {
  struct bnode *anc, *succ, *par, *leaf;
  uint64_t succ_edge, leaf_edge;
};

static lf_word *child(struct bnode *n, uint64_t key) {
  return key < lf_v(n)->key ? &n->left : &n->right;
}

static void seek(struct root *r, uint64_t key, struct seekrec *s) {
  s->anc = &r->r;
  s->succ = s->par = &r->s;
  s->succ_edge = lf_load(&r->r.left);
  uint64_t pe = lf_load(&r->s.left); /* the edge par -> leaf */
  s->leaf = lf_ptr(pe);
  for (;;) {
    uint64_t ce = lf_load(child(s->leaf, key));
    struct bnode *cur = lf_ptr(ce);
    if (!cur)
      break; /* s->leaf is a leaf */
    if (!(pe & TAG)) {
      s->anc = s->par;
      s->succ = s->leaf;
      s->succ_edge = pe;
    }
    s->par = s->leaf;
    s->leaf = cur;
    pe = ce;
  }
  s->leaf_edge = pe;
}

/* Splice out the parent of the flagged leaf on key's path, moving the
 * sibling up to the ancestor's edge; 1 if this call did it. */
static int cleanup(const struct seekrec *s, uint64_t key) {
  lf_word *cw = child(s->par, key), *sw;
  sw = cw == &s->par->left ? &s->par->right : &s->par->left;
  if (!(lf_load(cw) & FLAG))
    sw = cw; /* the flagged leaf is the other child: keep this one */
  uint64_t sv = lf_set_bits(sw, TAG); /* freeze the edge that moves up */
  if (lf_bits(s->succ_edge))
    return 0; /* not the plain edge the splice expects */
  return lf_cas(child(s->anc, key), s->succ_edge,
                lf_make(lf_ptr(sv), sv & FLAG)); /* keeps its FLAG */
}

static int bst_insert(struct root *r, uint64_t key, uint64_t stamp) {
  struct bnode *leaf = NULL, *in = NULL;
  key = tkey(key);
  for (;;) {
    struct seekrec s;
    seek(r, key, &s);
    uint64_t lk = lf_v(s.leaf)->key;
    if (lk == key) {
      pm_free(in); /* never published */
      pm_free(leaf);
      return 0;
    }
    if (!leaf) {
      if (!(leaf = pm_alloc(sizeof *leaf)) || !(in = pm_alloc(sizeof *in)))
        return -1;
      leaf->key = key;
      leaf->stamp = stamp;
      lf_publish(leaf, sizeof *leaf);
    }
    in->key = key > lk ? key : lk;
    lf_init(&in->left, lf_make(key < lk ? leaf : s.leaf, 0));
    lf_init(&in->right, lf_make(key < lk ? s.leaf : leaf, 0));
    lf_publish(in, sizeof *in); /* durable before it is reachable */
    lf_word *cw = child(s.par, key);
    if (!lf_bits(s.leaf_edge) && lf_cas(cw, s.leaf_edge, lf_make(in, 0)))
      return 0; /* the commit point */
    uint64_t v = lf_load(cw);
    if (lf_ptr(v) == s.leaf && lf_bits(v))
      cleanup(&s, key); /* help the delete in the way */
  }
}

static void bst_delete(struct root *r, uint64_t key) {
  struct bnode *leaf = NULL; /* set once this thread flagged it */
  key = tkey(key);
  for (;;) {
    struct seekrec s;
    seek(r, key, &s);
    if (leaf) { /* flagged: done once it is spliced out, by anyone */
      if (s.leaf != leaf || cleanup(&s, key))
        return;
      continue;
    }
    if (lf_v(s.leaf)->key != key)
      return;
    lf_word *cw = child(s.par, key);
    if (!lf_bits(s.leaf_edge) &&
        lf_cas(cw, s.leaf_edge, lf_with(s.leaf_edge, FLAG))) {
      leaf = s.leaf;
      if (cleanup(&s, key))
        return; /* the commit point */
      continue;
    }
    uint64_t v = lf_load(cw);
    if (lf_ptr(v) == s.leaf && lf_bits(v))
      cleanup(&s, key);
  }
}

static int bst_contains(struct root *r, uint64_t key) {
  struct seekrec s;
  seek(r, tkey(key), &s);
  return lf_v(s.leaf)->key == tkey(key);
}

static int nm_init(void *rootp) {
  struct root *r = rootp;
  if (bench_cfg->keys > 0xfffffffdull)
    return -1; /* tkey would reach the sentinels */
  PM_TX_ADD(r, sizeof *r);
  r->r.key = r->l2.key = INF2;
  r->s.key = r->l1.key = INF1;
  r->l0.key = INF0;
  lf_init(&r->r.left, lf_make(&r->s, 0));
  lf_init(&r->r.right, lf_make(&r->l2, 0));
  lf_init(&r->s.left, lf_make(&r->l0, 0));
  lf_init(&r->s.right, lf_make(&r->l1, 0));
  lf_publish(r, sizeof *r);
  return 0;
}

/* Depth-first walk of the persistent replica below S: visit(n, lo, hi) for
 * each node, whose keys must lie in [lo, hi). Stops at the first nonzero
 * return, or with -2 after more nodes than a tree over the key range has
 * (a cycle), -3 out of memory. */
typedef int visit_fn(struct bnode *n, uint64_t lo, uint64_t hi, void *arg);
struct frame {
  struct bnode *n;
  uint64_t lo, hi;
};

static int walk(struct root *r, visit_fn *visit, void *arg) {
  size_t cap = 64, sp = 0;
  uint64_t budget = 2 * bench_cfg->keys + 8;
  struct frame *st = malloc(cap * sizeof *st);
  int rc = st ? 0 : -3;
  if (st)
    st[sp++] = (struct frame){lf_ptr(atomic_load(&r->s.left)), 0, INF1};
  while (!rc && sp) {
    struct frame f = st[--sp];
    if (!budget--) {
      rc = -2;
      break;
    }
    if ((rc = visit(f.n, f.lo, f.hi, arg)))
      break;
    struct bnode *a = lf_ptr(atomic_load(&f.n->left));
    struct bnode *b = lf_ptr(atomic_load(&f.n->right));
    if (!a || !b)
      continue; /* a leaf (visit rejected half a node) */
    if (sp + 2 > cap) {
      struct frame *t = realloc(st, (cap *= 2) * sizeof *st);
      if (!t) {
        rc = -3;
        break;
      }
      st = t;
    }
    st[sp++] = (struct frame){b, f.n->key, f.hi};
    st[sp++] = (struct frame){a, f.lo, f.n->key};
  }
  free(st);
  return rc;
}

struct checking {
  struct bench_check *c;
  struct root *r;
  int l0; /* times the INF0 leaf was met: once, as the rightmost leaf */
};

static int check_node(struct bnode *n, uint64_t lo, uint64_t hi, void *arg) {
  struct checking *ck = arg;
  struct bench_check *c = ck->c;
  uint64_t l = atomic_load(&n->left), rt = atomic_load(&n->right);
  unsigned long long k = n->key;
  if (!lf_ptr(l) != !lf_ptr(rt))
    return bench_fail(c, "node %llx has one child", k);
  if (!lf_ptr(l)) {             /* a leaf */
    uint64_t key = (uint32_t)k; /* the key rides in the low half */
    if (k < lo || k >= hi ||
        (k != INF0 && (key >= bench_cfg->keys || tkey(key) != k)))
      return bench_fail(c, "leaf %llx out of place or out of range", k);
    if (k == INF0 && (n != &ck->r->l0 || ck->l0++))
      return bench_fail(c, "an INF0 leaf twice, or not the sentinel");
    return k == INF0 ? 0 : bench_found(c, key, n->stamp);
  }
  if (k <= lo || k >= hi)
    return bench_fail(c, "internal node %llx out of place", k);
  for (int i = 0; i < 2; i++) {
    uint64_t e = i ? rt : l, o = i ? l : rt;
    struct bnode *t = lf_ptr(e);
    if ((e & FLAG) && (atomic_load(&t->left) || atomic_load(&t->right)))
      return bench_fail(c, "node %llx: a flagged edge to an inner node", k);
    if ((e & TAG) && !(o & FLAG))
      return bench_fail(c, "node %llx: a tagged edge beside no flag", k);
  }
  return 0;
}

/* 1 if w is a plain edge (no FLAG or TAG) to n. */
static int edge_to(lf_word *w, const struct bnode *n) {
  uint64_t v = atomic_load(w);
  return lf_ptr(v) == n && !lf_bits(v);
}

static int nm_check(void *rootp, struct bench_check *c) {
  struct root *r = rootp;
  if (r->r.key != INF2 || r->s.key != INF1 || r->l0.key != INF0 ||
      r->l1.key != INF1 || r->l2.key != INF2 || !edge_to(&r->r.left, &r->s) ||
      !edge_to(&r->r.right, &r->l2) || !edge_to(&r->s.right, &r->l1))
    return bench_fail(c, "the sentinel nodes are damaged");
  struct checking ck = {c, r, 0};
  int rc = walk(r, check_node, &ck);
  if (!rc && !ck.l0)
    return bench_fail(c, "the INF0 leaf is lost");
  if (rc == -2)
    return bench_fail(c, "more nodes than keys allow: a cycle?");
  return rc == -3 ? bench_fail(c, "out of memory") : rc;
}

#ifdef BENCH_PMDK
static int mirror_node(struct bnode *n, uint64_t lo, uint64_t hi, void *arg) {
  (void)lo, (void)hi, (void)arg;
  lf_mirror(n, sizeof *n);
  return 0;
}
#endif

/* pmdk: map the volatile replica and, on a reopened pool, fill it. */
static int nm_attach(void *rootp) {
  struct root *r = rootp;
  if (lf_mirror_map())
    return -1;
  lf_mirror(r, sizeof *r);
#ifdef BENCH_PMDK
  if (atomic_load(&r->s.left) && walk(r, mirror_node, NULL))
    return -1;
#endif
  return 0;
}

static int nm_op(void *rootp, unsigned tid, const struct bench_op *op,
                 void *scratch) {
  (void)tid;
  (void)scratch;
  switch (op->kind) {
  case BENCH_INSERT:
    return bst_insert(rootp, op->key, op->stamp);
  case BENCH_DELETE:
    bst_delete(rootp, op->key);
    return 0;
  default:
    (void)bst_contains(rootp, op->key);
    return 0;
  }
}

static const struct bench_workload nmbst = {
    .name = "nmbst",
    .root_size = sizeof(struct root),
    .set = 1,
    .notx = 1,
    .read_pct = 80,
    .init = nm_init,
    .attach = nm_attach,
    .op = nm_op,
    .check = nm_check,
};
BENCH_WORKLOAD(nmbst);
