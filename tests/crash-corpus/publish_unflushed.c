/* SPDX-License-Identifier: Apache-2.0 */
/*
 * publish_unflushed.c -- crash corpus: a node published before it is durable.
 * The program pushes three nodes onto a persistent singly linked list: it
 * allocates a node, fills in key, value and next, and makes it the head with
 * one 8-byte pointer store that it persists. The bug (-DBUGGY): the node is
 * never flushed, so with volatile caches the persisted head can point at a
 * node whose contents, even whose allocation, never reached PM. The fixed
 * variant persists the node (flush and fence) before it stores the head, so
 * the head store cannot persist before the node. Consistent: every node
 * reachable from the head is a live block of the pool, and the list reads
 * keys k, k-1, ..., 1 (0 <= k <= 3) with the value val_of(key) in each.
 * Under eADR the buggy variant is also correct: every node store precedes
 * the head store in program order and a crash keeps a prefix of the stores,
 * so its only bug is the missing flush (expected: pass).
 */
#define CORPUS_LAYOUT "corpus-publish-unflushed"
#include "corpus.h"

#define NPUSH 3

struct node {
  uint64_t key, val;
  struct node *next;
};

struct root {
  struct node *head;
};

static uint64_t val_of(uint64_t key) { return key * 1000003u + 17u; }

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t key = 1; !err && key <= NPUSH; key++) {
    struct node *n;
    pmkit_mark_begin("push");
    if ((err = pmkit_alloc(pool, sizeof *n, (void **)&n)) != 0)
      break;
    n->key = key;
    n->val = val_of(key);
    n->next = r->head;
#ifndef BUGGY
    pmkit_persist(n, sizeof *n); /* durable before it is reachable */
#endif
    r->head = n;
    pmkit_persist(&r->head, sizeof r->head);
    pmkit_mark_end("push");
  }
  return err;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  uint64_t want = 0; /* the key the next node must have; 0 = any (first) */
  int depth = 0;
  for (const struct node *n = r->head; n; n = n->next, depth++) {
    if (depth == NPUSH)
      return corpus_bad(why, wn, "the list is longer than %d nodes", NPUSH);
    if (pmkit_usable_size(pool, n) < sizeof *n)
      return corpus_bad(why, wn, "node %d (%p) is not an allocated block",
                        depth, (const void *)n);
    if (n->key == 0 || n->key > NPUSH || (want && n->key != want))
      return corpus_bad(why, wn, "node %d has key %llu, expected %llu", depth,
                        (unsigned long long)n->key, (unsigned long long)want);
    if (n->val != val_of(n->key))
      return corpus_bad(why, wn, "node with key %llu has value %llu",
                        (unsigned long long)n->key, (unsigned long long)n->val);
    want = n->key - 1;
    if (want == 0 && n->next)
      return corpus_bad(why, wn, "node with key 1 is not the last");
  }
  return 0;
}
