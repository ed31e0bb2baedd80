/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c -- the pmkit pool, as the backends built on it share it (pmkit,
 * clobber, ssapp; backend.h): bench_pool_open, bench_pool_close,
 * bench_pool_check and bench_pool_block_ok for their bench_backend
 * entries, and bench.h's pm_alloc. Each of those backends frees (pm_free)
 * in its own way.
 */
#include <stdio.h>

#include "backend.h"

pmkit_pool *bench_pool;

int bench_pool_open(const char *path, int create, size_t size, uint64_t mib,
                    char *why, size_t wn) {
  pmkit_pool_opts o = {.layout = "pmkit-bench"};
  int err = create ? pmkit_pool_create(path, mib << 20, &o, &bench_pool)
                   : pmkit_pool_open(path, &o, &bench_pool);
  if (!err && (err = pmkit_root(bench_pool, size, (void **)&bench_hdr)))
    pmkit_pool_close(bench_pool);
  if (err)
    return snprintf(why, wn, "%s: %s", pmkit_strerror(err), pmkit_errormsg()),
           -1;
  return 0;
}

void bench_pool_close(void) {
  pmkit_pool_close(bench_pool);
  bench_hdr = NULL;
}

int bench_pool_check(char *why, size_t wn) {
  if (!pmkit_pool_check(bench_pool))
    return 0;
  return snprintf(why, wn, "pool metadata: %s", pmkit_errormsg()), -1;
}

int bench_pool_block_ok(const void *p, size_t n) {
  return pmkit_usable_size(bench_pool, p) >= n;
}

void *pm_alloc(size_t n) {
  void *p;
  if (pmkit_zalloc(bench_pool, n, &p))
    return NULL;
  return p;
}
