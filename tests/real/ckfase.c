// SPDX-License-Identifier: Apache-2.0
// Concurrency Kit's lock-free stack (ck_stack, push and pop by two threads) and
// its single-producer single-consumer queue (ck_fifo_spsc, one thread each
// way), Debian's ck unmodified with its compiler-builtin atomics, each
// operation a FASE of SSAPP mode: the program of the real-program tier
// (tests/real/realtier.py) for ssapp mode, on an eADR pool.
//
// Each FASE does one operation and counts it in the pool: a push allocates a
// record (thread, sequence, value) and pushes it; a pop logs what it took; the
// producer enqueues the next number, the consumer logs what it dequeued. SSAPP
// makes each FASE happen exactly once across crashes: its compare-and-swaps
// carry a tag that recovery reads back, and recovery resumes the FASE where it
// stopped.
//
//   ckfase run POOL N     create POOL (or resume it: pmkit_recover, then go on)
//   and run N
//                         iterations in each thread
//   ckfase check POOL N   pmkit_recover, then verify exactly: every record
//   pushed is in the
//                         stack or in a pop's log, once; the consumer's log is
//                         0, 1, 2, ... and the queue holds the rest of what was
//                         enqueued, in order
//   ckfase bench POOL N   as run on a new pool, timed: one JSON line
//
// Built without -DCKFASE_FASE, the same operations are plain functions: the
// volatile build of the throughput comparison.
#include "realprog.h"
#include <ck_fifo.h>
#include <ck_stack.h>
#include <pmkit/pmkit.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CKFASE_FASE
// glue begin: ssapp (each operation a FASE)
#define OP PMKIT_FASE
// glue end
#define PTR(p) pmkit_ssapp_ptr(p) // words a FASE's RMW wrote carry a tag
#else
#define OP __attribute__((noinline))
#define PTR(p) (p)
#endif

#ifndef MAXOPS
#define MAXOPS 4096 // iterations per thread at most; the bench builds take more
#endif
#ifndef POOL_MB
#define POOL_MB 8 // small: each crash test copies the pool
#endif

struct rec {
  ck_stack_entry_t link; // first: the stack's entry is the record
  uint64_t who, seq, val;
};

struct item {
  ck_fifo_spsc_entry_t entry;
  uint64_t seq;
};

struct root {
  ck_stack_t stack;
  ck_fifo_spsc_t fifo;
  uint64_t ready;
  uint64_t iter[2]; // iterations begun, per thread (a FASE of its own)
  uint64_t pushed[2];
  uint64_t npop[2];
  uint64_t enq, deq;
  struct rec
      *popped[2][MAXOPS]; // what each pop took (NULL: the stack was empty)
  uint64_t got[MAXOPS];   // the consumer's log
};

static uint64_t value(uint64_t who, uint64_t seq) {
  uint64_t x = (who << 40) ^ (seq * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  return x * 0xBF58476D1CE4E5B9ull | 1;
}

static pmkit_pool *pool;

OP void op_push(struct root *r, uint64_t who) {
  struct rec *x;
  if (pmkit_alloc(pool, sizeof *x, (void **)&x))
    abort();
  x->who = who;
  x->seq = r->pushed[who];
  x->val = value(who, x->seq);
  ck_stack_push_upmc(&r->stack, &x->link);
  r->pushed[who]++;
}

OP void op_pop(struct root *r, uint64_t who) {
  ck_stack_entry_t *e = ck_stack_pop_upmc(&r->stack);
  r->popped[who][r->npop[who]] = (struct rec *)e;
  r->npop[who]++;
}

OP void op_enqueue(struct root *r) {
  struct item *it;
  if (pmkit_alloc(pool, sizeof *it, (void **)&it))
    abort();
  it->seq = r->enq;
  ck_fifo_spsc_enqueue(&r->fifo, &it->entry, it);
  r->enq++;
}

OP void op_dequeue(struct root *r) {
  struct item *it;
  if (ck_fifo_spsc_dequeue(&r->fifo, &it)) {
    r->got[r->deq] = it->seq;
    r->deq++;
  }
}

OP void op_next(struct root *r, uint64_t who) { r->iter[who]++; }

static struct root *root;
static uint64_t iters;
static int recovered; // FASEs pmkit_recover completed at this start

static void *worker(void *arg) {
  uint64_t who = (uint64_t)(uintptr_t)arg;
  struct root *r = root;
  // Resumable: each iteration's steps are done in order and counted, so a
  // restarted run picks up at the step the counters say is next.
  while (r->iter[who] < iters || (who == 1 && r->deq < iters)) {
    uint64_t i = r->iter[who];
    if (i < iters) {
      if (r->pushed[who] == i)
        op_push(r, who);
      if (r->npop[who] < (i + 1) / (2 + who))
        op_pop(r, who);
      if (who == 0 && r->enq == i)
        op_enqueue(r);
    }
    if (who == 1 && r->deq < r->enq)
      op_dequeue(r);
    if (i < iters)
      op_next(r, who);
  }
  return NULL;
}

static int bad(const char *what, uint64_t a, uint64_t b) {
  printf("inconsistent: %s (%llu, %llu)\n", what, (unsigned long long)a,
         (unsigned long long)b);
  return 1;
}

static int check(void) {
  struct root *r = root;
  if (!r->ready)
    return printf("ok: not set up yet, %d recovered\n", recovered), 0;
  // every record pushed is in the stack or in a pop's log, exactly once
  static uint8_t seen[2][MAXOPS];
  uint64_t depth = 0;
  for (ck_stack_entry_t *e = PTR(r->stack.head); e; e = PTR(e->next)) {
    struct rec *x = (struct rec *)e;
    if (++depth > 2 * MAXOPS || !pmkit_in_pool(x))
      return bad("the stack runs away", depth, 0);
    if (x->who > 1 || x->seq >= r->pushed[x->who] ||
        x->val != value(x->who, x->seq))
      return bad("a record in the stack was not pushed whole", x->who, x->seq);
    if (seen[x->who][x->seq]++)
      return bad("a record is in the stack twice", x->who, x->seq);
  }
  for (int t = 0; t < 2; t++)
    for (uint64_t k = 0; k < r->npop[t]; k++) {
      struct rec *x = PTR(r->popped[t][k]);
      if (!x)
        continue;
      if (!pmkit_in_pool(x) || x->who > 1 || x->seq >= r->pushed[x->who])
        return bad("a pop took what was never pushed", t, k);
      if (seen[x->who][x->seq]++)
        return bad(
            "a record was popped twice, or popped and still in the stack",
            x->who, x->seq);
    }
  for (int t = 0; t < 2; t++)
    for (uint64_t s = 0; s < r->pushed[t]; s++)
      if (!seen[t][s])
        return bad("a pushed record is lost", t, s);
  // the queue: the consumer's log is 0..deq-1, the queue holds deq..enq-1
  if (r->deq > r->enq)
    return bad("more dequeued than enqueued", r->deq, r->enq);
  for (uint64_t k = 0; k < r->deq; k++)
    if (r->got[k] != k)
      return bad("the consumer got a number out of order", k, r->got[k]);
  uint64_t want = r->deq;
  for (ck_fifo_spsc_entry_t *e = r->fifo.head->next; e; e = e->next) {
    struct item *it = e->value;
    if (!pmkit_in_pool(it) || it->seq != want)
      return bad("the queue holds a number out of order", want,
                 it ? it->seq : 0);
    want++;
  }
  if (want != r->enq)
    return bad("the queue does not hold what was enqueued", want, r->enq);
  printf("ok: %llu+%llu pushed, %llu+%llu popped, %llu enqueued, %llu "
         "dequeued, %d recovered\n",
         (unsigned long long)r->pushed[0], (unsigned long long)r->pushed[1],
         (unsigned long long)r->npop[0], (unsigned long long)r->npop[1],
         (unsigned long long)r->enq, (unsigned long long)r->deq, recovered);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4 || (iters = strtoull(argv[3], NULL, 10)) > MAXOPS) {
    fprintf(stderr, "usage: ckfase run|check|bench POOL N (N <= %d)\n", MAXOPS);
    return 2;
  }
  int checking = !strcmp(argv[1], "check"), bench = !strcmp(argv[1], "bench");
  FILE *f = bench ? NULL : fopen(argv[2], "r");
  int create = !checking && !f;
  if (f)
    fclose(f);
  if (bench)
    remove(argv[2]);
  int err = create
                ? pmkit_pool_create(argv[2], (size_t)POOL_MB << 20, NULL, &pool)
                : pmkit_pool_open(argv[2], NULL, &pool);
  if (err || pmkit_root(pool, sizeof *root, (void **)&root)) {
    fprintf(stderr, "ckfase: cannot open %s: %s\n", argv[2], pmkit_errormsg());
    return 2;
  }
  if (!create && (recovered = pmkit_recover(pool)) < 0) {
    fprintf(stderr, "ckfase: pmkit_recover: %s\n", pmkit_errormsg());
    return 2;
  }
  if (checking)
    return check();
  if (!root->ready) {
    struct item *stub;
    if (pmkit_zalloc(pool, sizeof *stub, (void **)&stub))
      return 2;
    ck_fifo_spsc_init(&root->fifo, &stub->entry);
    pmkit_persist(&root->fifo, sizeof root->fifo);
    root->ready = 1;
    pmkit_persist(&root->ready, sizeof root->ready);
  }
  pthread_t t[2];
  double t0 = real_now();
  for (uintptr_t i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, worker, (void *)i);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  double s = real_now() - t0;
  if (bench)
    printf("{\"iterations\": %llu, \"seconds\": %.6f, \"ops_per_sec\": %.1f}\n",
           (unsigned long long)iters, s,
           (double)(root->pushed[0] + root->pushed[1] + root->npop[0] +
                    root->npop[1] + root->enq + root->deq) /
               s);
  pmkit_pool_close(pool);
  return 0;
}
