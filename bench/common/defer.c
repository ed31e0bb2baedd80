/* SPDX-License-Identifier: Apache-2.0 */
/*
 * defer.c -- the DRAM locks of the pmkit, pmdk and clobber backends, whose
 * releases inside an operation wait for its end (defer.h): the thread's
 * operation state (op_cur) and bench.h's bench_lock_release.
 */
#include "defer.h"
#include "backend.h"

__thread struct op_state op_cur;

void bench_lock_release(bench_lock *l) {
  if (!op_cur.in_op) {
    pthread_mutex_unlock(l);
    return;
  }
  if (op_cur.nheld == BENCH_MAX_HELD)
    bench_die("an operation released more than %u locks", BENCH_MAX_HELD);
  op_cur.held[op_cur.nheld++] = l;
}
