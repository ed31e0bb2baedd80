// SPDX-License-Identifier: Apache-2.0
// Litmus programs of ssapp mode, one FASE each, run in turn on one pool:
// an increment (i++), a swap, a transfer between two locations, a loop that
// reads and overwrites an array (a value carried from one iteration to the
// next), an overlapping memmove, and a stack in the pool under a PM lock
// (and a lock in static data) whose push allocates a node and whose pop
// frees one. Each FASE also advances the count of
// operations done. `check` recovers the pool (pmkit_recover, which resumes
// an interrupted FASE) and compares it with a replay of operations
// 0..done-1 in DRAM: a lost, repeated or half-applied operation fails.
// Used by lit (below) and by tests/cli/test_ssapp.py, which crashes a run
// at every crash point in turn.
//
// Usage: litmus run POOL N [THREADS]  create POOL or resume it; run to N
//                                     operations (per thread)
//        litmus check POOL [N]        recover, verify; with N, require it
//
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -mllvm -pmkit-ssapp-report \
// RUN:   -mllvm -pmkit-ssapp-rmw-ints %s %link_pmkit -o %t 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=REPORT
// RUN: rm -f %t.pool && %t run %t.pool 40 && %t check %t.pool 40 | %FileCheck %s
// RUN: rm -f %t.pool2 && %t run %t.pool2 40 2 && %t check %t.pool2 40 \
// RUN:   | %FileCheck %s
// CHECK: ok: 40 operations
// REPORT-LABEL: pmkit-ssapp: FASE op_incr: 3 RISEs
// REPORT-NEXT: RISE 1 read line [[#@LINE+47]], {{[0-9]+}} torn-bit slots
// REPORT-NEXT: RISE 2 write line [[#@LINE+46]]
// REPORT-NEXT: RISE 3 call line [[#@LINE+87]]
// The memmove: its bytes go to the thread's buffer in a read RISE (with a
// checksum slot), then out in a RISE of their own.
// REPORT-LABEL: pmkit-ssapp: FASE op_shift: 4 RISEs
// REPORT-NEXT: RISE 1 read line [[#@LINE+75]]
// REPORT-NEXT: RISE 2 call line [[#@LINE+75]]
// An atomic add: its RISE holds the RMW alone, and its result's slots.
// REPORT-LABEL: pmkit-ssapp: FASE op_faa: 4 RISEs
// REPORT: RISE 2 rmw line [[#@LINE+106]], 2 torn-bit slots
// REPORT-LABEL: pmkit-ssapp: FASE op_push
// REPORT: alloc line [[#@LINE+129]]
#include <pmkit/pmkit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NARR 8
#define MAXT 4
struct node {
  uint64_t v;
  struct node *next;
};
struct lane { /* one thread's share of the pool: its own words */
  uint64_t done;
  uint64_t x, a, b;
  int64_t from, to;
  uint64_t arr[NARR];
  uint64_t acc;
  uint64_t pad[2];
};
struct root {
  uint64_t magic;
  uint32_t threads;
  _Atomic uint64_t hits;       /* fetch_add by every lane: tagged by ssapp */
  struct node *_Atomic lf_top; /* a lock-free stack: pushes by CAS */
  pmkit_mutex lock;            /* guards the stack */
  struct node *top;
  uint64_t depth;
  uint64_t pushed; /* sum of values pushed, minus those popped */
  struct lane lane[MAXT];
};

/* The bodies, shared by the FASEs and the check's DRAM replay. */
static inline void incr(struct lane *l) { l->x++; }

static inline void swap(struct lane *l, uint64_t i) {
  uint64_t t = l->a;
  l->a = l->b;
  l->b = t + i;
}

static inline void transfer(struct lane *l, uint64_t i) {
  int64_t amount = (int64_t)(i % 7) + 1;
  if (l->from >= amount) {
    l->from -= amount;
    l->to += amount;
  } else {
    l->from += l->to;
    l->to = 0;
  }
}

/* Each element becomes a function of the one before it, as overwritten in
 * this very loop: re-executing an iteration from an overwritten value
 * would show. */
static inline void scan(struct lane *l, uint64_t i) {
  uint64_t acc = l->acc;
  for (unsigned k = 0; k < NARR; k++) {
    acc = acc * 31 + l->arr[k] + i;
    l->arr[k] = acc >> 3;
  }
  l->acc = acc;
}

/* Shifts a prefix of the array up by one element in place: the ranges
 * overlap, so moving them again after a crash would shift twice. */
static inline void shift(struct lane *l, uint64_t i) {
  size_t n = 1 + i % (NARR - 1);
  memmove(&l->arr[1], &l->arr[0], n * sizeof l->arr[0]);
  l->arr[0] = i;
}

PMKIT_FASE void op_incr(struct lane *l, uint64_t i) {
  incr(l);
  l->done = i + 1;
}

PMKIT_FASE void op_swap(struct lane *l, uint64_t i) {
  swap(l, i);
  l->done = i + 1;
}

PMKIT_FASE void op_transfer(struct lane *l, uint64_t i) {
  transfer(l, i);
  l->done = i + 1;
}

PMKIT_FASE void op_scan(struct lane *l, uint64_t i) {
  scan(l, i);
  l->done = i + 1;
}

PMKIT_FASE void op_shift(struct lane *l, uint64_t i) {
  shift(l, i);
  l->done = i + 1;
}

/* Lock-free: a counter every lane adds to (an atomic add, exactly once per
 * operation), and a Treiber stack pushed onto with a compare-exchange loop:
 * recovery must tell whether an interrupted RMW took effect, or it would
 * apply it twice or not at all. */
PMKIT_FASE void op_faa(struct root *r, struct lane *l, uint64_t i) {
  atomic_fetch_add(&r->hits, i % 5 + 1);
  l->done = i + 1;
}

PMKIT_FASE int op_lfpush(struct root *r, struct lane *l, uint64_t i) {
  struct node *n;
  if (pmkit_alloc(pmkit_pool_of(r), sizeof *n, (void **)&n))
    return -1;
  n->v = i * 7 + 3;
  struct node *top = atomic_load(&r->lf_top);
  do
    n->next = top;
  while (!atomic_compare_exchange_weak(&r->lf_top, &top, n));
  l->done = i + 1;
  return 0;
}

/* Guards `pushed` as well (inside r->lock): a lock in the program's static
 * data, which recovery finds again at the same offset in the new run. */
static pmkit_mutex sum_lock;

PMKIT_FASE int op_push(struct root *r, struct lane *l, uint64_t i) {
  pmkit_pool *pool = pmkit_pool_of(r);
  struct node *n;
  pmkit_mutex_lock(&r->lock);
  if (pmkit_alloc(pool, sizeof *n, (void **)&n)) {
    pmkit_mutex_unlock(&r->lock);
    return -1;
  }
  n->v = i * 3 + 1;
  n->next = r->top;
  r->top = n;
  r->depth++;
  pmkit_mutex_lock(&sum_lock);
  r->pushed += n->v;
  pmkit_mutex_unlock(&sum_lock);
  pmkit_mutex_unlock(&r->lock);
  l->done = i + 1;
  return 0;
}

PMKIT_FASE void op_pop(struct root *r, struct lane *l, uint64_t i) {
  pmkit_mutex_lock(&r->lock);
  struct node *n = r->top;
  if (n) {
    r->top = n->next;
    r->depth--;
    pmkit_mutex_lock(&sum_lock);
    r->pushed -= n->v;
    pmkit_mutex_unlock(&sum_lock);
    pmkit_free(pmkit_pool_of(r), n);
  }
  pmkit_mutex_unlock(&r->lock);
  l->done = i + 1;
}

enum { NOPS = 9 };

/* Operation i of a lane, outside any FASE. */
static int apply(struct root *r, struct lane *l, uint64_t i) {
  switch (i % NOPS) {
  case 0:
    op_incr(l, i);
    return 0;
  case 1:
    op_swap(l, i);
    return 0;
  case 2:
    op_transfer(l, i);
    return 0;
  case 3:
    op_scan(l, i);
    return 0;
  case 4:
    return op_push(r, l, i);
  case 5:
    op_shift(l, i);
    return 0;
  case 6:
    op_faa(r, l, i);
    return 0;
  case 7:
    return op_lfpush(r, l, i);
  default:
    /* pop every other time: the stack grows */
    if (i % (2 * NOPS) == NOPS - 1)
      op_pop(r, l, i);
    else
      op_incr(l, i);
    return 0;
  }
}

/* The same operations on a DRAM lane, for the check (the stack's effect
 * on depth and sum only, which the check compares as totals). */
static void replay(struct lane *l, uint64_t i, int64_t *depth, int64_t *sum) {
  switch (i % NOPS) {
  case 0:
    incr(l);
    break;
  case 1:
    swap(l, i);
    break;
  case 2:
    transfer(l, i);
    break;
  case 3:
    scan(l, i);
    break;
  case 4:
    ++*depth;
    *sum += (int64_t)(i * 3 + 1);
    break;
  case 5:
    shift(l, i);
    break;
  case 6:
  case 7: /* on the root: checked as totals */
    break;
  default:
    if (i % (2 * NOPS) == NOPS - 1)
      *depth = -1; /* a pop: the popped value depends on the interleaving */
    else
      incr(l);
    break;
  }
  l->done = i + 1;
}

static void lane_init(struct lane *l, unsigned t) {
  memset(l, 0, sizeof *l);
  l->a = 1 + t;
  l->b = 2;
  l->from = 50;
  for (unsigned k = 0; k < NARR; k++)
    l->arr[k] = k + t;
}

static struct root *open_root(const char *path, int create, unsigned threads,
                              pmkit_pool **out) {
  pmkit_pool *p;
  void *root;
  if (pmkit_pool_open(path, NULL, &p)) {
    if (!create || pmkit_pool_create(path, 8u << 20, NULL, &p)) {
      fprintf(stderr, "litmus: %s\n", pmkit_errormsg());
      exit(2);
    }
  }
  if (pmkit_root(p, sizeof(struct root), &root)) {
    fprintf(stderr, "litmus: %s\n", pmkit_errormsg());
    exit(2);
  }
  struct root *r = root;
  if (r->magic != 0x4c49544d && create) {
    r->threads = threads;
    for (unsigned t = 0; t < MAXT; t++)
      lane_init(&r->lane[t], t);
    pmkit_persist(r, sizeof *r);
    r->magic = 0x4c49544d; /* set up: operations may begin */
    pmkit_persist(&r->magic, 8);
  }
  *out = p;
  return r;
}

struct worker {
  struct root *r;
  unsigned t;
  uint64_t n;
};

static void *work(void *arg) {
  struct worker *w = arg;
  struct lane *l = &w->r->lane[w->t];
  for (uint64_t i = l->done; i < w->n; i++)
    if (apply(w->r, l, i)) {
      fprintf(stderr, "litmus: the pool is full\n");
      exit(2);
    }
  return NULL;
}

static int run(const char *path, uint64_t n, unsigned threads) {
  pmkit_pool *p;
  struct root *r = open_root(path, 1, threads, &p);
  if (pmkit_recover(p) < 0) {
    fprintf(stderr, "litmus: recovery failed: %s\n", pmkit_errormsg());
    return 2;
  }
  pthread_t tid[MAXT];
  struct worker w[MAXT];
  for (unsigned t = 0; t < r->threads; t++) {
    w[t] = (struct worker){r, t, n};
    if (r->threads == 1)
      work(&w[t]);
    else
      pthread_create(&tid[t], NULL, work, &w[t]);
  }
  if (r->threads > 1)
    for (unsigned t = 0; t < r->threads; t++)
      pthread_join(tid[t], NULL);
  pmkit_pool_close(p);
  return 0;
}

static int check(const char *path, long want) {
  pmkit_pool *p;
  struct root *r = open_root(path, 0, 0, &p);
  if (r->magic != 0x4c49544d) {
    printf("ok: 0 operations (not set up)\n");
    return 0;
  }
  int n = pmkit_recover(p);
  if (n < 0) {
    printf("FAILED: recovery: %s\n", pmkit_errormsg());
    return 1;
  }
  int64_t depth = 0, sum = 0;
  int popped = 0;
  uint64_t total = 0, hits = 0, lf_n = 0, lf_sum = 0;
  for (unsigned t = 0; t < r->threads; t++) {
    struct lane *l = &r->lane[t], m;
    lane_init(&m, t);
    for (uint64_t i = 0; i < l->done; i++) {
      if (i % NOPS == 6)
        hits += i % 5 + 1;
      if (i % NOPS == 7)
        lf_n++, lf_sum += i * 7 + 3;
      int64_t d0 = depth;
      replay(&m, i, &depth, &sum);
      if (depth < 0) { /* a pop */
        popped++;
        depth = d0 - 1;
      }
    }
    if (memcmp(&m, l, sizeof m)) {
      printf("FAILED: lane %u after %llu operations differs from a replay "
             "(x %llu/%llu a %llu/%llu b %llu/%llu from %lld/%lld to "
             "%lld/%lld acc %llu/%llu)\n",
             t, (unsigned long long)l->done, (unsigned long long)l->x,
             (unsigned long long)m.x, (unsigned long long)l->a,
             (unsigned long long)m.a, (unsigned long long)l->b,
             (unsigned long long)m.b, (long long)l->from, (long long)m.from,
             (long long)l->to, (long long)m.to, (unsigned long long)l->acc,
             (unsigned long long)m.acc);
      return 1;
    }
    total += l->done;
  }
  /* The stack: its depth is the pushes minus the pops, its sum the sum of
   * the nodes it holds; with one thread the sum is known too. */
  uint64_t walk = 0, s = 0;
  for (struct node *q = r->top; q && walk <= r->depth + 1; q = q->next)
    s += q->v, walk++; /* bounded: a re-executed push may close a cycle */
  if ((int64_t)walk != depth || r->depth != walk || r->pushed != s ||
      (r->threads == 1 && !popped && (int64_t)s != sum)) {
    printf("FAILED: stack of %llu nodes (sum %llu), recorded %llu (sum "
           "%llu), expected %lld\n",
           (unsigned long long)walk, (unsigned long long)s,
           (unsigned long long)r->depth, (unsigned long long)r->pushed,
           (long long)depth);
    return 1;
  }
  /* The RMWs: each applied exactly once. The words carry ssapp's tags. */
  uint64_t got = pmkit_ssapp_value(atomic_load(&r->hits)), n2 = 0, s2 = 0;
  for (struct node *q = pmkit_ssapp_ptr(atomic_load(&r->lf_top));
       q && n2 <= lf_n + 1; q = q->next)
    s2 += q->v, n2++;
  if (got != hits || n2 != lf_n || s2 != lf_sum) {
    printf("FAILED: counter %llu (expected %llu), lock-free stack of %llu "
           "nodes with sum %llu (expected %llu, %llu)\n",
           (unsigned long long)got, (unsigned long long)hits,
           (unsigned long long)n2, (unsigned long long)s2,
           (unsigned long long)lf_n, (unsigned long long)lf_sum);
    return 1;
  }
  if (want >= 0 && total != (uint64_t)want * r->threads) {
    printf("FAILED: %llu operations done, expected %ld\n",
           (unsigned long long)total, want * (long)r->threads);
    return 1;
  }
  printf("ok: %llu operations%s\n", (unsigned long long)total / r->threads,
         n ? " (recovered)" : "");
  pmkit_pool_close(p);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "run"))
    return run(argv[2], strtoull(argv[3], NULL, 10),
               argc > 4 ? (unsigned)atoi(argv[4]) : 1);
  if (argc >= 3 && !strcmp(argv[1], "check"))
    return check(argv[2], argc > 3 ? atol(argv[3]) : -1);
  fprintf(stderr, "usage: litmus run POOL N [THREADS] | check POOL [N]\n");
  return 2;
}
