/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.h -- the volatile state libpmkit keeps beside a mapped pool (the pool
 * handle, its context slots' handles), the registry of open pools
 * (pool.c) and pool offsets to addresses.
 */
#ifndef PMKIT_CORE_POOL_H
#define PMKIT_CORE_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base.h"
#include "layout.h"

#define PMK_MAX_POOLS 16u /* open at once in one process */

/* Volatile per-chunk state (small chunks). */
enum { PMK_CS_NONE = 0, PMK_CS_OWNED, PMK_CS_DETACHED, PMK_CS_LISTED };

struct pmk_list {
  pthread_mutex_t lock;
  uint32_t *ids;
  uint32_t n, cap;
};

struct pmkit_ctx {
  struct pmkit_pool *pool;
  struct pmk_ctx_pm *pm;
  unsigned id;
};

struct pmkit_pool {
  int fd;
  unsigned id;     /* index in the registry */
  uint64_t serial; /* distinguishes reopenings for thread caches */
  unsigned flags;
  char *path;
  uintptr_t base;
  size_t size;
  struct pmk_hdr *hdr;
  struct pmk_state *st;
  uint32_t *table;
  uintptr_t heap;
  uint32_t nchunks;
  uint64_t gen;
  struct pmk_ctx_pm *ctxs;
  struct pmkit_ctx ctx[PMKIT_MAX_THREADS];
  _Atomic int claimed[PMKIT_MAX_THREADS];

  pthread_mutex_t chunk_lock; /* free chunk map and large runs */
  uint64_t *freemap;          /* 1 = chunk free (volatile mirror) */
  uint32_t rover;
  _Atomic uint8_t *cstate;
  struct pmk_list partial[PMK_NCLASS];
  pthread_mutex_t root_lock;
};

/* pmkit_pool.flags bits beyond the public PMKIT_POOL_* ones. */
#define PMK_POOL_ATTACHED 0x100u /* pmkit_pool_attach: not ours to unmap */

PMK_HIDDEN uint64_t pmk_next_serial(void);
/* The open pool in registry slot id if its serial is still `serial`. */
PMK_HIDDEN pmkit_pool *pmk_reg_lookup(unsigned id, uint64_t serial);
/* The open pool if exactly one is open, else NULL. */
PMK_HIDDEN pmkit_pool *pmk_only_pool(void);
static inline void *pmk_at(const pmkit_pool *p, uint64_t off) {
  return (void *)(p->base + off);
}

#endif /* PMKIT_CORE_POOL_H */
