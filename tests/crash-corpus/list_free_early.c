/* SPDX-License-Identifier: Apache-2.0 */
/*
 * list_free_early.c -- crash corpus: a node freed before it is unlinked.
 * The program builds a persistent linked list 3 -> 2 -> 1 (each node
 * persisted before it is published) and then deletes node 2. The bug
 * (-DBUGGY): the delete calls pmkit_free on the node first and unlinks it
 * afterwards, so a crash in between leaves a freed block reachable from the
 * list -- the allocator may hand it out again and a later allocation would
 * overwrite a live node. The free is visible in a crash image: it clears the
 * block's bit in the chunk bitmap (a locked AND that pmkit does not flush:
 * a lost free only leaks). The fixed variant unlinks and persists the
 * unlink, then frees, as pmkit_free requires. Consistent: every node
 * reachable from the head is a live block holding its key's value, keys
 * descend to 1 one by one, except that key 2 may be missing, and the pool's
 * allocator metadata passes pmkit_pool_check. Under eADR the buggy variant
 * still fails: the free's store precedes the unlink in program order, so a
 * crash between them shows the freed node still linked (expected: fail).
 */
#define CORPUS_LAYOUT "corpus-list-free-early"
#include "corpus.h"

#define NPUSH 3
#define VICTIM 2

struct node {
  uint64_t key, val;
  struct node *next;
};

struct root {
  struct node *head;
};

static uint64_t val_of(uint64_t key) { return key * 0x9e3779b97f4a7c15ull; }

static int push(pmkit_pool *pool, struct root *r, uint64_t key) {
  struct node *n;
  int err = pmkit_alloc(pool, sizeof *n, (void **)&n);
  if (err)
    return err;
  n->key = key;
  n->val = val_of(key);
  n->next = r->head;
  pmkit_persist(n, sizeof *n);
  r->head = n;
  pmkit_persist(&r->head, sizeof r->head);
  return 0;
}

static int delete(pmkit_pool *pool, struct root *r, uint64_t key) {
  struct node **link = &r->head;
  while (*link && (*link)->key != key)
    link = &(*link)->next;
  struct node *victim = *link;
  if (!victim)
    return 0;
#ifdef BUGGY
  int err = pmkit_free(pool, victim); /* still reachable: too early */
  *link = victim->next;
  pmkit_persist(link, sizeof *link);
  return err;
#else
  *link = victim->next;
  pmkit_persist(link, sizeof *link); /* durably unpublished first */
  return pmkit_free(pool, victim);
#endif
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  for (uint64_t key = 1; !err && key <= NPUSH; key++) {
    pmkit_mark_begin("push");
    err = push(pool, r, key);
    pmkit_mark_end("push");
  }
  if (!err) {
    pmkit_mark_begin("delete");
    err = delete (pool, r, VICTIM);
    pmkit_mark_end("delete");
  }
  return err;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  uint64_t last = 0; /* the previous node's key; keys strictly descend */
  for (const struct node *n = r->head; n; n = n->next) {
    if (pmkit_usable_size(pool, n) < sizeof *n)
      return corpus_bad(why, wn,
                        "a node reachable from the list (%p, after key "
                        "%llu) is not an allocated block",
                        (const void *)n, (unsigned long long)last);
    if (n->key == 0 || n->key > NPUSH || n->val != val_of(n->key))
      return corpus_bad(why, wn, "node with key %llu, value %#llx",
                        (unsigned long long)n->key, (unsigned long long)n->val);
    if (last && n->key != last - 1 &&
        !(last == VICTIM + 1 && n->key == VICTIM - 1))
      return corpus_bad(why, wn, "key %llu follows key %llu",
                        (unsigned long long)n->key, (unsigned long long)last);
    last = n->key;
  }
  if (last > 1)
    return corpus_bad(why, wn, "the list ends at key %llu",
                      (unsigned long long)last);
  return 0;
}
