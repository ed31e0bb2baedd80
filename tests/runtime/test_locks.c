/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_locks.c -- PM-resident locks: mutual exclusion under contention
 * (exact counts from 4 threads), reader-writer exclusion, and the reset
 * after a crash: a child takes both locks in the pool and dies holding
 * them; the next run must acquire them at once.
 */
#include <pthread.h>
#include <sys/wait.h>

#include "testutil.h"

struct root {
  pmkit_mutex m;
  pmkit_rwlock rw;
  uint64_t counter;
  uint64_t a, b; /* written together under the write lock */
};

static struct root *rt;
#define ITERS 200000

static void *incr(void *arg) {
  (void)arg;
  for (int i = 0; i < ITERS; i++) {
    pmkit_mutex_lock(&rt->m);
    rt->counter++;
    pmkit_mutex_unlock(&rt->m);
  }
  return NULL;
}

static _Atomic int torn;
static void *rw_worker(void *arg) {
  uintptr_t writer = (uintptr_t)arg;
  for (int i = 0; i < ITERS / 4; i++) {
    if (writer) {
      pmkit_rwlock_wrlock(&rt->rw);
      rt->a++;
      rt->b++;
      pmkit_rwlock_unlock(&rt->rw);
    } else {
      pmkit_rwlock_rdlock(&rt->rw);
      if (rt->a != rt->b)
        torn = 1;
      pmkit_rwlock_unlock(&rt->rw);
    }
  }
  return NULL;
}

static const char *path;
static pmkit_pool *p;

/* Mutual exclusion: exact counts from 4 threads. */
static void mutex_exclusion(void) {
  path = test_pool_path("locks");
  CHECK_OK(pmkit_pool_create(path, 4 << 20, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *rt, (void **)&rt));
  pthread_t th[4];
  for (int i = 0; i < 4; i++)
    CHECK(pthread_create(&th[i], NULL, incr, NULL) == 0);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  CHECK(rt->counter == 4ull * ITERS);
}

/* Reader-writer exclusion: one writer, three readers, nothing torn. */
static void rwlock_exclusion(void) {
  pthread_t th[4];
  for (uintptr_t i = 0; i < 4; i++)
    CHECK(pthread_create(&th[i], NULL, rw_worker, (void *)(uintptr_t)(i < 1)) ==
          0);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  CHECK(!torn && rt->a == ITERS / 4 && rt->b == rt->a);
}

/* Held in this run: trylock reports BUSY. */
static void held_is_busy(void) {
  pmkit_mutex_lock(&rt->m);
  CHECK_RC(pmkit_mutex_trylock(&rt->m), PMKIT_E_BUSY);
  pmkit_mutex_unlock(&rt->m);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crashed run holding both locks: the next run acquires them at once. */
static void reset_after_crash(void) {
  pid_t pid = fork();
  if (pid == 0) {
    pmkit_pool *q;
    struct root *r;
    if (pmkit_pool_open(path, NULL, &q) ||
        pmkit_root(q, sizeof *r, (void **)&r))
      _exit(3);
    pmkit_mutex_lock(&r->m);
    pmkit_rwlock_wrlock(&r->rw);
    _exit(PMKIT_CRASH_EXIT);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
        WEXITSTATUS(st) == PMKIT_CRASH_EXIT);
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *rt, (void **)&rt));
  CHECK(rt->m.state != 0);               /* still marked held in PM... */
  CHECK_OK(pmkit_mutex_trylock(&rt->m)); /* ...but from a dead run */
  pmkit_mutex_unlock(&rt->m);
  pmkit_rwlock_rdlock(&rt->rw);
  pmkit_rwlock_unlock(&rt->rw);
  CHECK_OK(pmkit_pool_close(p));
}

/* Locks in DRAM work too. */
static void dram_locks(void) {
  static pmkit_mutex dm;
  pmkit_mutex_lock(&dm);
  CHECK_RC(pmkit_mutex_trylock(&dm), PMKIT_E_BUSY);
  pmkit_mutex_unlock(&dm);
}

int main(void) {
  TEST_CASE(mutex_exclusion);
  TEST_CASE(rwlock_exclusion);
  TEST_CASE(held_is_busy);
  TEST_CASE(reset_after_crash);
  TEST_CASE(dram_locks);
  unlink(path);
  return test_summary();
}
