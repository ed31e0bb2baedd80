// SPDX-License-Identifier: Apache-2.0
// Concurrency Kit's lock-free structures (Debian's ck, unmodified, built with
// its compiler-builtin atomics) kept in a pmkit pool and used by two threads: a
// stack (ck_stack, push and pop), a multi-producer multi-consumer queue
// (ck_ring, MPMC) and a hash set (ck_hs, one writer and one reader). The
// program of the real-program tier (tests/real/realtier.py) for robust mode; no
// flush or fence is written anywhere.
//
// Each thread pushes records (thread, sequence, value) on the stack and
// enqueues others on the ring, and pops and dequeues now and then (what is
// taken out is left in the pool: lock-free code has no safe time to free it).
// Thread 0 inserts objects into the hash set; thread 1 looks them up.
//
// Robust mode makes every crash image one that a crash under strict persistency
// could leave, and these algorithms leave a consistent structure after each of
// their atomic steps, with two exceptions that the glue handles at start-up
// (`reopen`): ck_hs keeps function pointers (its allocator, hash and compare
// functions) in the structure, which are rebound, since the program may be
// loaded at another address; and a ck_ring producer that had reserved a slot
// (p_head) but not yet published it (p_tail) would make the next producer wait
// for it forever, so the reservation is dropped (p_head = p_tail).
//
//   ckpm run POOL N      create POOL and run N iterations in each of the 2
//   threads ckpm check POOL N    reopen (with the glue's recovery), verify,
//   then use each structure ckpm bench POOL N    as run, timed: one JSON line
//
// The check: every record reachable in the stack, the ring and the hash set was
// written whole, none twice; each thread's records are in the stack newest
// first and in the ring oldest first (the order each structure promises); the
// hash set finds every object it holds; and after recovery a push, a pop, an
// enqueue, a dequeue and an insert succeed.
#include "realprog.h"
#include <ck_hs.h>
#include <ck_ring.h>
#include <ck_stack.h>
#include <pmkit/pmkit.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef CKPM_POOL_MB
#define CKPM_POOL_MB                                                           \
  64 // the traced builds take 4: each crash image explored is a copy
#endif
#define RING 64 // ring slots (a power of 2)
#define THREADS 2

struct rec {
  ck_stack_entry_t link; // first: the stack's entry is the record
  uint64_t who, seq, val;
};

struct obj {
  uint64_t key, val;
};

struct root {
  ck_stack_t stack;
  ck_ring_t ring;
  ck_ring_buffer_t slots[RING];
  ck_hs_t hs;
  uint64_t ready; // set once the structures are initialised
};

static uint64_t value(uint64_t who, uint64_t seq) {
  uint64_t x = (who << 40) ^ (seq * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  return x * 0xBF58476D1CE4E5B9ull | 1;
}

// glue begin: robust (ck's allocation and callbacks sent to the pool, rebound
// at start-up)
static pmkit_pool *pool;

static void *pm_malloc(size_t n) {
  void *p;
  return pmkit_alloc(pool, n, &p) ? NULL : p;
}

static void *pm_realloc(void *p, size_t old, size_t n, bool defer) {
  (void)defer;
  void *q = pm_malloc(n);
  if (q && p)
    memcpy(q, p, old < n ? old : n);
  return q; // the old block is left: a reader may still be on it
}

static void pm_free(void *p, size_t n, bool defer) {
  (void)n;
  if (!defer) // a deferred free waits for readers, which ck leaves to its user:
              // kept
    pmkit_free(pool, p);
}

static struct ck_malloc allocator = {pm_malloc, pm_realloc, pm_free};

static unsigned long obj_hash(const void *o, unsigned long seed) {
  uint64_t k = ((const struct obj *)o)->key ^ seed;
  k *= 0xFF51AFD7ED558CCDull;
  return (unsigned long)(k ^ (k >> 33));
}

static bool obj_same(const void *a, const void *b) {
  return ((const struct obj *)a)->key == ((const struct obj *)b)->key;
}

// At every start: ck_hs's function pointers are this process's, the ring's
// unpublished reservations are dropped.
static void reopen(struct root *r) {
  r->hs.m = &allocator;
  r->hs.hf = obj_hash;
  r->hs.compare = obj_same;
  r->ring.p_head = r->ring.p_tail;
}
// glue end

static struct root *root;
static uint64_t iters;

static struct rec *new_rec(uint64_t who, uint64_t seq) {
  struct rec *x = pm_malloc(sizeof *x);
  if (!x)
    abort();
  x->who = who;
  x->seq = seq;
  x->val = value(who, seq);
  return x;
}

static void *worker(void *arg) {
  uint64_t who = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < iters; i++) {
    pmkit_mark_begin("op");
    ck_stack_push_upmc(&root->stack, &new_rec(who, 2 * i)->link);
    ck_ring_enqueue_mpmc(&root->ring, root->slots, new_rec(who, 2 * i + 1));
    void *out;
    if (i % 3 == 2)
      ck_stack_pop_upmc(&root->stack);
    if (i % 4 != 0)
      ck_ring_dequeue_mpmc(&root->ring, root->slots, &out);
    if (who == 0) {
      struct obj *o = pm_malloc(sizeof *o);
      o->key = i;
      o->val = value(9, i);
      ck_hs_put(&root->hs, obj_hash(o, root->hs.seed), o);
    } else {
      struct obj k = {i / 2, 0};
      (void)ck_hs_get(&root->hs, obj_hash(&k, root->hs.seed), &k);
    }
    pmkit_mark_end("op");
  }
  return NULL;
}

static int bad(const char *what, uint64_t a, uint64_t b) {
  printf("inconsistent: %s (%llu, %llu)\n", what, (unsigned long long)a,
         (unsigned long long)b);
  return 1;
}

static int whole(const struct rec *x, uint64_t n) {
  return pmkit_in_pool(x) && x->who < THREADS && x->seq < 2 * n &&
         x->val == value(x->who, x->seq);
}

// ck_hs's map is private to ck: a torn one is found by following it.
static void torn(int sig) {
  (void)sig;
  static const char msg[] =
      "inconsistent: a pointer in the structures leads nowhere (SIGSEGV)\n";
  (void)!write(1, msg, sizeof msg - 1);
  _exit(1);
}

static int check(uint64_t n) {
  struct root *r = root;
  signal(SIGSEGV, torn);
  signal(SIGBUS, torn);
  if (!r->ready)
    return printf("ok: not set up yet\n"), 0;
  reopen(r);
  // the stack: newest first, per thread
  uint64_t last[THREADS] = {UINT64_MAX, UINT64_MAX}, depth = 0;
  for (ck_stack_entry_t *e = r->stack.head; e; e = e->next) {
    struct rec *x = (struct rec *)e;
    if (++depth > THREADS * n + 1)
      return bad("the stack runs away", depth, 0);
    if (!whole(x, n) || x->seq % 2)
      return bad("a record in the stack was not written whole", depth, 0);
    if (x->seq >= last[x->who])
      return bad("the stack holds a thread's records out of order", x->who,
                 x->seq);
    last[x->who] = x->seq;
  }
  // the ring: oldest first, per thread, between the consumer's head and the
  // published tail
  unsigned c = r->ring.c_head, p = r->ring.p_tail;
  if (r->ring.size != RING || r->ring.mask != RING - 1 || p - c >= RING)
    return bad("the ring's indexes are off", c, p);
  uint64_t first[THREADS] = {0, 0}, seen[THREADS] = {0, 0};
  for (unsigned i = c; i != p; i++) {
    struct rec *x = r->slots[i & (RING - 1)].value;
    if (!whole(x, n) || !(x->seq % 2))
      return bad("a record in the ring was not written whole", i, 0);
    if (seen[x->who] && x->seq <= first[x->who])
      return bad("the ring holds a thread's records out of order", x->who,
                 x->seq);
    first[x->who] = x->seq;
    seen[x->who] = 1;
  }
  // the hash set: every object whole and found
  if (!pmkit_in_pool(r->hs.map))
    return bad("the hash set has no map", 0, 0);
  ck_hs_iterator_t it = CK_HS_ITERATOR_INITIALIZER;
  void *o;
  unsigned long objs = 0;
  while (ck_hs_next(&r->hs, &it, &o)) {
    struct obj *b = o;
    if (!pmkit_in_pool(b) || b->key >= n || b->val != value(9, b->key))
      return bad("an object in the hash set was not written whole", objs, 0);
    if (ck_hs_get(&r->hs, obj_hash(b, r->hs.seed), b) != b)
      return bad("the hash set does not find an object it holds", b->key, 0);
    objs++;
  }
  // and each structure still works
  struct rec *x = new_rec(0, 0);
  void *out;
  struct obj *k = pm_malloc(sizeof *k);
  k->key = n + 1;
  k->val = value(9, n + 1);
  if (!ck_ring_enqueue_mpmc(&r->ring, r->slots, x) &&
      p - c < RING - 1) // one slot stays free
    return bad("the ring refuses an enqueue", c, p);
  if (!ck_ring_dequeue_mpmc(&r->ring, r->slots, &out))
    return bad("the ring refuses a dequeue", c, p);
  ck_stack_push_upmc(&r->stack, &x->link);
  if (ck_stack_pop_upmc(&r->stack) != &x->link)
    return bad("the stack does not give back what was pushed", 0, 0);
  if (!ck_hs_put(&r->hs, obj_hash(k, r->hs.seed), k) ||
      ck_hs_get(&r->hs, obj_hash(k, r->hs.seed), k) != k)
    return bad("the hash set refuses an insert", objs, 0);
  printf("ok: stack %llu deep, ring %u, hash set %lu\n",
         (unsigned long long)depth, p - c, objs);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ckpm run|check|bench POOL N\n");
    return 2;
  }
  iters = strtoull(argv[3], NULL, 10);
  int checking = !strcmp(argv[1], "check");
  if (!checking)
    remove(argv[2]);
  int err = checking ? pmkit_pool_open(argv[2], NULL, &pool)
                     : pmkit_pool_create(argv[2], (size_t)CKPM_POOL_MB << 20,
                                         NULL, &pool);
  if (err || pmkit_root(pool, sizeof *root, (void **)&root)) {
    fprintf(stderr, "ckpm: cannot open %s: %s\n", argv[2], pmkit_errormsg());
    return 2;
  }
  if (checking)
    return check(iters);
  ck_ring_init(&root->ring, RING);
  if (!ck_hs_init(&root->hs, CK_HS_MODE_SPMC | CK_HS_MODE_OBJECT, obj_hash,
                  obj_same, &allocator, 8, 6602834))
    return 2;
  root->ready = 1;
  pthread_t t[THREADS];
  double t0 = real_now();
  for (uintptr_t i = 0; i < THREADS; i++)
    pthread_create(&t[i], NULL, worker, (void *)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  double s = real_now() - t0;
  if (!strcmp(argv[1], "bench"))
    printf("{\"iterations\": %llu, \"seconds\": %.6f, \"ops_per_sec\": %.1f}\n",
           (unsigned long long)iters, s, (double)(THREADS * iters) / s);
  pmkit_pool_close(pool);
  return 0;
}
