/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_volatile.c -- the backend (backend.h) of the volatile variant
 * (BENCH_VOLATILE): the run header and the workload's root in malloc'd
 * DRAM, nothing persistent, nothing to recover or check; locks are DRAM
 * mutexes released at once (bench.h). The upper bound the persistent
 * variants are measured against. Entry points: bench_backend,
 * backend_apply, pm_alloc and pm_free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static int dram_open(const char *path, int create, size_t size, uint64_t mib,
                     char *why, size_t wn) {
  (void)path;
  (void)create;
  (void)mib;
  bench_hdr = aligned_alloc(64, (size + 63) & ~63ul);
  if (!bench_hdr)
    return snprintf(why, wn, "out of memory"), -1;
  memset(bench_hdr, 0, size);
  return 0;
}

static void dram_close(void) {
  free(bench_hdr);
  bench_hdr = NULL;
}

void *pm_alloc(size_t n) { return calloc(1, n); }

void pm_free(void *p) { free(p); }

int backend_apply(const struct bench_op *op, unsigned t, uint64_t *done,
                  uint64_t next, void *scratch) {
  int err = bench_workload->op(bench_root(), t, op, scratch);
  if (!err)
    *done = next;
  return err;
}

const struct bench_backend bench_backend = {
    .variant = "volatile",
    .persistent = 0,
    .open = dram_open,
    .close = dram_close,
};
