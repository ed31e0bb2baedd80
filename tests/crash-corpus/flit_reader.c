/* SPDX-License-Identifier: Apache-2.0 */
/*
 * flit_reader.c -- crash corpus: a value derived from data another thread
 * made visible but not durable. Thread A (the producer) stores x in PM and
 * publishes it to thread B with a release store to an atomic flag; it does
 * not flush x, as in FliT, where whoever depends on a value persists it.
 * Thread B (the consumer) waits for the flag, reads x and persists y = f(x)
 * in PM. The bug (-DBUGGY): B persists y without persisting x first, so with
 * volatile caches y can be durable while x, still only in A's cache line,
 * is lost -- y then records a value PM never held. The fixed variant is
 * FliT's flush-on-read: B writes back x's line and fences before it stores
 * y. A flush by any thread writes back the line as it is, with A's store in
 * it, since B read that store. Consistent: if y is set, y = f(41) and x =
 * 41. Under eADR the buggy variant is correct: A's store to x precedes its
 * flag store, which precedes B's load and so B's store to y, in the one
 * global store order that persistent caches keep (expected: pass).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define CORPUS_LAYOUT "corpus-flit-reader"
#include "corpus.h"

#define X_VALUE 41u

struct root {
  _Alignas(64) uint64_t x;
  _Alignas(64) _Atomic uint64_t ready;
  _Alignas(64) uint64_t y;
};

static uint64_t derive(uint64_t x) { return 2 * x + 1; }

static void *producer(void *arg) {
  struct root *r = arg;
  pmkit_mark_begin("produce");
  r->x = X_VALUE; /* not flushed: the consumer persists what it depends on */
  atomic_store_explicit(&r->ready, 1, memory_order_release);
  pmkit_mark_end("produce");
  return NULL;
}

static void *consumer(void *arg) {
  struct root *r = arg;
  while (!atomic_load_explicit(&r->ready, memory_order_acquire))
    sched_yield();
  pmkit_mark_begin("consume");
  uint64_t x = r->x;
#ifndef BUGGY
  pmkit_persist(&r->x, sizeof r->x); /* flush on read: x before anything
                                        derived from it */
#endif
  r->y = derive(x);
  pmkit_persist(&r->y, sizeof r->y);
  pmkit_mark_end("consume");
  return NULL;
}

static int corpus_run(pmkit_pool *pool) {
  struct root *r;
  pthread_t a, b;
  int err = pmkit_root(pool, sizeof *r, (void **)&r);
  if (err)
    return err;
  if (pthread_create(&b, NULL, consumer, r) != 0)
    return PMKIT_E_NOMEM;
  if (pthread_create(&a, NULL, producer, r) != 0) {
    atomic_store(&r->ready, 1); /* let the consumer finish */
    pthread_join(b, NULL);
    return PMKIT_E_NOMEM;
  }
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  return 0;
}

static int corpus_check(pmkit_pool *pool, char *why, size_t wn) {
  struct root *r;
  if (corpus_root(pool, sizeof *r, &r, why, wn))
    return -1;
  if (r->x != 0 && r->x != X_VALUE)
    return corpus_bad(why, wn, "x = %llu", (unsigned long long)r->x);
  if (r->y == 0)
    return 0;
  if (r->y != derive(X_VALUE))
    return corpus_bad(why, wn, "y = %llu", (unsigned long long)r->y);
  if (r->x != X_VALUE)
    return corpus_bad(why, wn, "y = f(%u) is durable but x is %llu", X_VALUE,
                      (unsigned long long)r->x);
  return 0;
}
