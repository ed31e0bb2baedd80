// SPDX-License-Identifier: Apache-2.0
// Recovery with two sections in flight on one row: thread B holds the lock,
// has incremented the row (a clobber write, logged) and stops inside its
// FASE; thread A has begun the same FASE and waits for the lock; then the
// process dies (a kill: the pool keeps every store). A's slot is the lower
// one, so recovery meets it first. Recovery must restore B's input before A
// re-executes: re-executed over B's uncommitted increment, A's update was
// lost when B's roll-back restored the row (row 1 after two completed
// increments). Expected: both re-executed, the row at 2.
//
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber %s %link_pmkit -lpthread \
// RUN:   -o %t
// RUN: rm -f %t.pool && %t run %t.pool && %t check %t.pool | %FileCheck %s
// CHECK: recovered 2: row 2, done 1 1

#include <pmkit/pmkit.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct root {
  long row, done[2], warm;
};

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile int hold = 1, recovering, a_in, b_in, a_ready, a_go;

// Strict two-phase locking: the lock is released after the call returns,
// or at its end while recovery runs (one re-execution after the other).
PMKIT_FASE void bump(struct root *r, long who) {
  if (who == 0)
    a_in = 1;
  pthread_mutex_lock(&m);
  long v = r->row;
  r->row = v + 1;
  if (who == 1) {
    b_in = 1;
    while (hold)
      ;
  }
  r->done[who] = 1;
  if (recovering)
    pthread_mutex_unlock(&m);
}

// A's first section, so that A's thread takes the first slot.
PMKIT_FASE void warm_up(struct root *r) { r->warm = 1; }

static struct root *root;

static void *thread_a(void *arg) {
  (void)arg;
  warm_up(root);
  a_ready = 1;
  while (!a_go)
    ;
  bump(root, 0);
  return NULL;
}

static void *thread_b(void *arg) {
  (void)arg;
  bump(root, 1);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  pmkit_pool *p;
  if (!strcmp(argv[1], "check")) {
    if (pmkit_pool_open(argv[2], NULL, &p) ||
        pmkit_root(p, sizeof *root, (void **)&root))
      return 2;
    hold = 0;
    recovering = 1;
    int n = pmkit_recover(p);
    printf("recovered %d: row %ld, done %ld %ld\n", n, root->row, root->done[0],
           root->done[1]);
    return pmkit_pool_close(p) ? 2 : 0;
  }
  if (pmkit_pool_create(argv[2], 8 << 20, NULL, &p) ||
      pmkit_root(p, sizeof *root, (void **)&root))
    return 2;
  pthread_t a, b;
  pthread_create(&a, NULL, thread_a, NULL);
  while (!a_ready)
    ;
  pthread_create(&b, NULL, thread_b, NULL);
  while (!b_in)
    ;
  a_go = 1;
  while (!a_in)
    ;
  usleep(50000); // A waits for the lock
  _exit(0);      // dies with both sections in flight
}
