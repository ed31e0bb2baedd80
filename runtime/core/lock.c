/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lock.c -- PM-resident mutex and reader-writer lock on Linux futexes. Each
 * lock carries the low 32 bits of the run generation of the pool it lives
 * in; a lock whose generation is not the current one was held by a crashed
 * run and is taken as free (reset by one 8-byte CAS), so recovery never
 * deadlocks on a lock a dead thread held. A lock outside any pool uses
 * generation 0, which zeroed memory already has.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define RW_WRITER 0x80000000u

static void futex_wait(uint32_t *a, uint32_t v) {
  syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void futex_wake(uint32_t *a, int n) {
  syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static uint32_t cur_gen(const void *lock) {
  pmkit_pool *p = pmkit_pool_of(lock);
  return p ? (uint32_t)p->gen : 0;
}

/* The lock word as one 64-bit value: state in the low half, gen high. */
static inline uint64_t word(uint32_t state, uint32_t gen) {
  return (uint64_t)gen << 32 | state;
}

/* Load the word, resetting it first if a crashed run left it. */
static uint64_t load_fresh(uint64_t *w, uint32_t gen) {
  uint64_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
  while ((uint32_t)(v >> 32) != gen) {
    if (__atomic_compare_exchange_n(w, &v, word(0, gen), 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      return word(0, gen);
  }
  return v;
}

static int cas_state(uint64_t *w, uint64_t *v, uint32_t state, uint32_t gen) {
  return __atomic_compare_exchange_n(w, v, word(state, gen), 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

void pmkit_mutex_lock(pmkit_mutex *m) {
  uint64_t *w = (uint64_t *)m;
  uint32_t gen = cur_gen(m);
  /* Once this thread has slept, others may still sleep: it must take the
   * lock as contended (2), or its unlock would wake nobody and a sleeper
   * would be lost (woken, it found the lock taken by a thread that then
   * released it uncontended). */
  uint32_t take = 1;
  for (int spin = 0;; spin++) {
    uint64_t v = load_fresh(w, gen);
    uint32_t s = (uint32_t)v;
    if (s == 0) {
      if (cas_state(w, &v, take, gen))
        return;
      continue;
    }
    if (spin < 64) {
      pmk_cpu_relax();
      continue;
    }
    if (s == 1 && !cas_state(w, &v, 2, gen))
      continue;
    futex_wait(&m->state, 2);
    take = 2;
    /* Woken: take it as contended so our unlock wakes the next waiter. */
    v = load_fresh(w, gen);
    while ((uint32_t)v == 0)
      if (cas_state(w, &v, 2, gen))
        return;
  }
}

int pmkit_mutex_trylock(pmkit_mutex *m) {
  pmk_clear_err();
  uint64_t *w = (uint64_t *)m;
  uint32_t gen = cur_gen(m);
  uint64_t v = load_fresh(w, gen);
  if ((uint32_t)v == 0 && cas_state(w, &v, 1, gen))
    return 0;
  return PMKIT_E_BUSY;
}

void pmkit_mutex_unlock(pmkit_mutex *m) {
  if (__atomic_exchange_n(&m->state, 0, __ATOMIC_RELEASE) == 2)
    futex_wake(&m->state, 1);
}

void pmkit_rwlock_rdlock(pmkit_rwlock *l) {
  uint64_t *w = (uint64_t *)l;
  uint32_t gen = cur_gen(l);
  for (int spin = 0;; spin++) {
    uint64_t v = load_fresh(w, gen);
    uint32_t s = (uint32_t)v;
    if (!(s & RW_WRITER)) {
      if (cas_state(w, &v, s + 1, gen))
        return;
      continue;
    }
    if (spin < 64)
      pmk_cpu_relax();
    else
      futex_wait(&l->state, s);
  }
}

void pmkit_rwlock_wrlock(pmkit_rwlock *l) {
  uint64_t *w = (uint64_t *)l;
  uint32_t gen = cur_gen(l);
  for (int spin = 0;; spin++) {
    uint64_t v = load_fresh(w, gen);
    uint32_t s = (uint32_t)v;
    if (s == 0) {
      if (cas_state(w, &v, RW_WRITER, gen))
        return;
      continue;
    }
    if (spin < 64)
      pmk_cpu_relax();
    else
      futex_wait(&l->state, s);
  }
}

void pmkit_rwlock_unlock(pmkit_rwlock *l) {
  uint32_t s = __atomic_load_n(&l->state, __ATOMIC_RELAXED);
  if (s & RW_WRITER) {
    __atomic_store_n(&l->state, 0, __ATOMIC_RELEASE);
    futex_wake(&l->state, 0x7fffffff);
    return;
  }
  if (__atomic_sub_fetch(&l->state, 1, __ATOMIC_RELEASE) == 0)
    futex_wake(&l->state, 0x7fffffff);
}
