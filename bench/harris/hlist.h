/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hlist.h -- Harris's lock-free sorted linked list (DISC'01) hanging off one
 * link word, shared by the harris workload (one list) and lfhash (one list
 * per bucket). A key is in the set when a node holding it is reachable from
 * the head and its own next word is not marked. Every change is one lf_cas
 * (lfword.h): under hand-eadr durable as it retires, under hand-adr once
 * lf_cas has flushed it (and no other thread acts on it before that), under
 * pmdk the CAS of the persistent replica, persisted before the volatile
 * replica shows it. That CAS is the operation's commit point:
 *   insert  the CAS that links a node, which was made durable before it;
 *   delete  the CAS that marks the node (logical deletion); unlinking it
 *           afterwards changes no key's presence, so a crash between the
 *           two leaves a marked node that the check skips and the next
 *           search snips out;
 *   read    changes nothing; every link it relied on was durable before it
 *           returned (lf_load).
 * A crash therefore leaves each key as the completed operations left it,
 * or as an operation in flight would leave it. The chain stays sorted in
 * every crash image: a node is linked only between two adjacent unmarked
 * nodes, only marked nodes are unlinked, and a CAS a crash may lose is one
 * no durable CAS was built on. Deleted nodes are never freed (no
 * memory reclamation): a traversal never meets a reused node, so a
 * pointer comparison is never fooled; the pool grows by one node per
 * effective insert.
 */
#ifndef PMKIT_BENCH_HLIST_H
#define PMKIT_BENCH_HLIST_H

#include "lfword.h"

struct hl_node {
  uint64_t key, stamp; /* immutable once linked                        */
  lf_word next;        /* HL_MARK: this node is deleted                */
};
#define HL_MARK LF_BIT0

/* Harris's search: the first unmarked node with a key >= key (NULL at the
 * end), and in *lw / *lv the word that must point to it and its value: the
 * head or the next word of the last unmarked node before it. Marked nodes
 * found between the two are unlinked by one CAS first. */
static struct hl_node *hl_search(lf_word *head, uint64_t key, lf_word **lw,
                                 uint64_t *lv) {
  for (;;) {
    struct hl_node *t;
    uint64_t v = lf_load(head);
    *lw = head;
    *lv = v;
    while ((t = lf_ptr(v))) {
      uint64_t tn = lf_load(&t->next);
      if (!(tn & HL_MARK)) {
        if (lf_v(t)->key >= key)
          break;
        *lw = &t->next;
        *lv = tn;
      }
      v = tn;
    }
    if (lf_ptr(*lv) != t) {
      if (!lf_cas(*lw, *lv, lf_make(t, 0)))
        continue; /* the left node changed or was deleted meanwhile */
      *lv = lf_written(*lv, lf_make(t, 0));
    }
    if (t && (lf_load(&t->next) & HL_MARK))
      continue; /* the right node was deleted meanwhile */
    return t;
  }
}

/* 1 if key is in the list: a wait-free walk that passes marked nodes. */
static int hl_contains(lf_word *head, uint64_t key) {
  struct hl_node *t = lf_ptr(lf_load(head));
  while (t && lf_v(t)->key < key)
    t = lf_ptr(lf_load(&t->next));
  return t && lf_v(t)->key == key && !(lf_load(&t->next) & HL_MARK);
}

/* Add key with the stamp of the insert (nothing if present); -1 when the
 * pool is full. */
static int hl_insert(lf_word *head, uint64_t key, uint64_t stamp) {
  struct hl_node *n = NULL;
  for (;;) {
    lf_word *lw;
    uint64_t lv;
    struct hl_node *right = hl_search(head, key, &lw, &lv);
    if (right && lf_v(right)->key == key) {
      pm_free(n); /* never published */
      return 0;
    }
    if (!n && !(n = pm_alloc(sizeof *n)))
      return -1;
    n->key = key;
    n->stamp = stamp;
    lf_init(&n->next, lf_make(right, 0));
    lf_publish(n, sizeof *n); /* durable before it is reachable */
    if (lf_cas(lw, lv, lf_make(n, 0)))
      return 0; /* the commit point */
  }
}

/* Remove key (nothing if absent). */
static void hl_delete(lf_word *head, uint64_t key) {
  for (;;) {
    lf_word *lw;
    uint64_t lv;
    struct hl_node *right = hl_search(head, key, &lw, &lv);
    if (!right || lf_v(right)->key != key)
      return;
    uint64_t rn = lf_load(&right->next);
    if ((rn & HL_MARK) || !lf_cas(&right->next, rn, lf_with(rn, HL_MARK)))
      continue;
    /* Deleted (the commit point). Unlink it, or leave that to a search. */
    if (!lf_cas(lw, lv, lf_with(rn, 0)))
      hl_search(head, key, &lw, &lv);
    return;
  }
}

/* The checker: walk the persistent replica from head. Keys must rise
 * strictly (so the walk ends: no cycle, no duplicate) and stay in range;
 * in_place, if given, says whether a key belongs in this list. Reports
 * every unmarked node with bench_found. */
static int hl_check(lf_word *head, struct bench_check *c,
                    int (*in_place)(uint64_t key, void *arg), void *arg) {
  uint64_t prev = 0;
  int first = 1;
  for (struct hl_node *n = lf_ptr(atomic_load(head)); n;
       n = lf_ptr(atomic_load(&n->next))) {
    if (n->key >= bench_cfg->keys || (!first && n->key <= prev))
      return bench_fail(c, "key %llu out of order or out of range",
                        (unsigned long long)n->key);
    if (in_place && !in_place(n->key, arg))
      return bench_fail(c, "key %llu is in the wrong list",
                        (unsigned long long)n->key);
    if (!(atomic_load(&n->next) & HL_MARK) && bench_found(c, n->key, n->stamp))
      return -1;
    prev = n->key;
    first = 0;
  }
  return 0;
}

#ifdef BENCH_PMDK
/* After a reopen: copy the list's reachable nodes into the volatile
 * replica (the caller copies the head word). -1 if the list is malformed. */
static int hl_mirror(lf_word *head) {
  uint64_t prev = 0;
  int first = 1;
  for (struct hl_node *n = lf_ptr(atomic_load(head)); n;
       n = lf_ptr(atomic_load(&n->next))) {
    if (!first && n->key <= prev)
      return -1;
    lf_mirror(n, sizeof *n);
    prev = n->key;
    first = 0;
  }
  return 0;
}
#endif

#endif /* PMKIT_BENCH_HLIST_H */
