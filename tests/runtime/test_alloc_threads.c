/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_alloc_threads.c -- the allocator under concurrency: four threads run
 * the heapwalk workload on their own slot ranges while also freeing blocks
 * published by the others (remote frees), then the heap is checked for
 * overlap, content and metadata; a second phase passes blocks through a
 * shared queue so nearly every free is remote and full chunks must come
 * back through the partial lists.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "heapwalk.h"

#define THREADS 4
#define OPS 20000

static pmkit_pool *pool;
static struct hw_root *root;

static void *worker(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg;
  uint64_t rng = 0x1234567ull * (t + 1);
  unsigned per = HW_SLOTS / THREADS;
  for (uint64_t k = 0; k < OPS; k++) {
    if (hw_step(pool, root, &rng, t * per, (t + 1) * per, k * THREADS + t)) {
      fprintf(stderr, "thread %u: %s\n", t, pmkit_errormsg());
      exit(1);
    }
  }
  return NULL;
}

/* Phase 2: producer allocates, consumer frees. */
#define QN 1024
static void *_Atomic queue[QN];

static void *producer(void *arg) {
  (void)arg;
  for (unsigned k = 0; k < 200000; k++) {
    void *b;
    if (pmkit_alloc(pool, 16 + (k % 7) * 48, &b)) {
      fprintf(stderr, "producer: %s\n", pmkit_errormsg());
      exit(1);
    }
    *(unsigned *)b = k;
    void *expect = NULL;
    while (!atomic_compare_exchange_weak(&queue[k % QN], &expect, b))
      expect = NULL;
  }
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (unsigned k = 0; k < 200000; k++) {
    void *b;
    while (!(b = atomic_exchange(&queue[k % QN], NULL)))
      ;
    if (*(unsigned *)b != k || pmkit_free(pool, b)) {
      fprintf(stderr, "consumer: block %u: %s\n", k, pmkit_errormsg());
      exit(1);
    }
  }
  return NULL;
}

static const char *path;
static int published;                 /* blocks hw_check found */
static pmkit_pool_info before, after; /* around phase 2 */

/* Four threads run the heapwalk workload; the heap checks out. */
static void four_workers(void) {
  path = test_pool_path("alloc-threads");
  CHECK_OK(pmkit_pool_create(path, 64 << 20, NULL, &pool));
  CHECK_OK(pmkit_root(pool, sizeof *root, (void **)&root));
  pthread_t th[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++)
    CHECK(pthread_create(&th[t], NULL, worker, (void *)t) == 0);
  for (unsigned t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);
  published = hw_check(pool, root);
  CHECK(published > 0);
}

/* Free another thread's blocks from this one (remote frees). */
static void remote_frees(void) {
  for (unsigned i = 0; i < HW_SLOTS; i += 2)
    if (root->slot[i]) {
      void *b = (void *)root->slot[i];
      root->slot[i] = 0;
      pmkit_persist(&root->slot[i], 8);
      CHECK_OK(pmkit_free(pool, b));
    }
  CHECK(hw_check(pool, root) >= 0);
}

/* Phase 2: every free remote; full chunks come back through the partial
 * lists. */
static void producer_consumer(void) {
  CHECK_OK(pmkit_pool_stat(pool, &before));
  pthread_t pr, co;
  CHECK(pthread_create(&pr, NULL, producer, NULL) == 0);
  CHECK(pthread_create(&co, NULL, consumer, NULL) == 0);
  pthread_join(pr, NULL);
  pthread_join(co, NULL);
  CHECK_OK(pmkit_pool_stat(pool, &after));
  CHECK(after.blocks_used == before.blocks_used);
  /* 200k blocks went through; remote frees made chunks reusable. */
  CHECK(after.chunks_small <= before.chunks_small + 16);
  CHECK(hw_check(pool, root) >= 0);
  CHECK_OK(pmkit_pool_close(pool));
}

/* The heap checks out after a reopen too. */
static void reopen(void) {
  CHECK_OK(pmkit_pool_open(path, NULL, &pool));
  CHECK_OK(pmkit_root(pool, sizeof *root, (void **)&root));
  CHECK(hw_check(pool, root) >= 0);
  CHECK_OK(pmkit_pool_close(pool));
}

int main(void) {
  TEST_CASE(four_workers);
  TEST_CASE(remote_frees);
  TEST_CASE(producer_consumer);
  TEST_CASE(reopen);
  unlink(path);
  printf("alloc_threads: %d blocks published by %d threads; small chunks "
         "%llu -> %llu\n",
         published, THREADS, (unsigned long long)before.chunks_small,
         (unsigned long long)after.chunks_small);
  return test_summary();
}
