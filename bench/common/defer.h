/* SPDX-License-Identifier: Apache-2.0 */
/*
 * defer.h -- what an operation defers to its end, in the backends whose
 * locks are DRAM mutexes (pmkit, pmdk, clobber; defer.c defines the state
 * and bench.h's bench_lock_release). A lock released inside an operation
 * stays held until op_end (two-phase locking, bench.h): no other thread
 * can see, and build on, a write that a crash could still roll back after
 * its own commit. The pmkit backend defers frees the same way
 * (op_defer_free): a block freed by an operation that is then rolled back
 * is still referenced. Entry points: op_begin, op_end, op_defer_free,
 * op_drop_frees, op_cur.
 */
#ifndef PMKIT_BENCH_DEFER_H
#define PMKIT_BENCH_DEFER_H

#include "backend.h"
#include "bench.h"

#define BENCH_MAX_HELD 64
#define BENCH_MAX_FREES 1024

/* The calling thread's operation. */
struct op_state {
  int in_op;
  unsigned t; /* the thread slot whose log the operation uses */
  unsigned nheld, nfrees;
  bench_lock *held[BENCH_MAX_HELD];
  void *frees[BENCH_MAX_FREES];
};
extern __thread struct op_state op_cur;

/* Thread slot t begins an operation: releases and frees wait from now. */
static inline void op_begin(unsigned t) {
  op_cur.in_op = 1;
  op_cur.t = t;
}

/* The operation has committed (or been rolled back): release its locks,
 * then free its blocks. */
static inline void op_end(void) {
  op_cur.in_op = 0;
  while (op_cur.nheld)
    pthread_mutex_unlock(op_cur.held[--op_cur.nheld]);
  while (op_cur.nfrees)
    pm_free(op_cur.frees[--op_cur.nfrees]);
}

/* Inside an operation: keep p to free at op_end and return 1; outside one,
 * 0 (the caller frees it now). */
static inline int op_defer_free(void *p) {
  if (!op_cur.in_op)
    return 0;
  if (op_cur.nfrees == BENCH_MAX_FREES)
    bench_die("an operation freed more than %u blocks", BENCH_MAX_FREES);
  op_cur.frees[op_cur.nfrees++] = p;
  return 1;
}

/* The operation was rolled back: the state it returned to still refers to
 * the blocks it freed, so they are not freed after all. */
static inline void op_drop_frees(void) { op_cur.nfrees = 0; }

#endif /* PMKIT_BENCH_DEFER_H */
