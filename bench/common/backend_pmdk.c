/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_pmdk.c -- the backend (backend.h) of the pmdk variant
 * (BENCH_PMDK): a PMDK libpmemobj pool mapped at a fixed address, each
 * operation one transaction with its counter update (PM_TX_ADD snapshots
 * what it changes; PMDK rolls back what a crash cut off when the pool is
 * opened), or, for a workload that persists by itself (notx, the lock-free
 * ones), the operation and then its counter made durable; DRAM locks
 * released at commit (defer.c). Entry points: bench_backend, backend_apply,
 * pm_alloc, pm_free and bench_pop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "defer.h"

PMEMobjpool *bench_pop;

/* ---- the pool ------------------------------------------------------------ */

/* PMDK maps a pool wherever the kernel likes; the workloads keep raw
 * pointers, so every run maps it at one address through libpmem's
 * PMEM_MMAP_HINT, which it reads at start-up: re-execute with it set. */
#define PMDK_HINT "0x100000000000"
static void pmdk_start(char **argv) {
  const char *h = getenv("PMEM_MMAP_HINT");
  if (h && !strcmp(h, PMDK_HINT))
    return;
  setenv("PMEM_MMAP_HINT", PMDK_HINT, 1);
  setenv("PMEM_IS_PMEM_FORCE", "1", 0);
  execv("/proc/self/exe", argv);
  bench_die("cannot re-execute with PMEM_MMAP_HINT: %s", strerror(errno));
}
#define LAYOUT "pmkit-bench"

static int pmdk_open(const char *path, int create, size_t size, uint64_t mib,
                     char *why, size_t wn) {
  if (create) {
    /* Created under a temporary name and renamed when complete (as pmkit
     * pools are), so a crash during creation never leaves a half-made pool
     * under the run's name. */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.creating", path);
    unlink(tmp);
    bench_pop = pmemobj_create(tmp, LAYOUT, mib << 20, 0644);
    if (bench_pop && rename(tmp, path)) {
      snprintf(why, wn, "%s: cannot rename into place: %s", tmp,
               strerror(errno));
      pmemobj_close(bench_pop);
      unlink(tmp);
      return -1;
    }
  } else {
    bench_pop = pmemobj_open(path, LAYOUT);
  }
  if (!bench_pop)
    return snprintf(why, wn, "%s: %s", path, pmemobj_errormsg()), -1;
  PMEMoid r = pmemobj_root(bench_pop, size);
  if (OID_IS_NULL(r))
    return snprintf(why, wn, "root: %s", pmemobj_errormsg()), -1;
  bench_hdr = pmemobj_direct(r);
  return 0;
}

static void pmdk_close(void) {
  pmemobj_close(bench_pop);
  bench_hdr = NULL;
}

static int pmdk_atomically(int (*fn)(void *arg), void *arg, void *snap,
                           size_t n) {
  /* volatile: set inside TX_BEGIN and read after an abort's longjmp */
  volatile int err = 0;
  TX_BEGIN(bench_pop) {
    if (n)
      pmemobj_tx_add_range_direct(snap, n);
    err = fn(arg);
  }
  TX_ONABORT { err = -1; }
  TX_END
  return err;
}

/* In a transaction, the allocation and the free are part of it; outside
 * one (the notx workloads), PMDK's atomic allocator. */
void *pm_alloc(size_t n) {
  PMEMoid o = OID_NULL;
  if (pmemobj_tx_stage() == TX_STAGE_WORK)
    o = pmemobj_tx_zalloc(n, 1);
  else if (pmemobj_zalloc(bench_pop, &o, n, 1))
    return NULL;
  return OID_IS_NULL(o) ? NULL : pmemobj_direct(o);
}

void pm_free(void *p) {
  if (!p)
    return;
  PMEMoid o = pmemobj_oid(p);
  if (pmemobj_tx_stage() == TX_STAGE_WORK)
    pmemobj_tx_free(o);
  else
    pmemobj_free(&o);
}

/* ---- operations ---------------------------------------------------------- */

int backend_apply(const struct bench_op *op, unsigned t, uint64_t *done,
                  uint64_t next, void *scratch) {
  void *root = bench_root();
  volatile int err = 0; /* read after an abort's longjmp (TX_ONABORT) */
  op_begin(t);
  if (bench_workload->notx) { /* Mirror-style: the workload persists */
    if (!(err = bench_workload->op(root, t, op, scratch))) {
      *done = next;
      pmemobj_persist(bench_pop, done, sizeof *done);
    }
    op_end();
    return err;
  }
  TX_BEGIN(bench_pop) {
    if ((err = bench_workload->op(root, t, op, scratch)) != 0)
      pmemobj_tx_abort(ECANCELED);
    pmemobj_tx_add_range_direct(done, sizeof *done);
    *done = next;
  }
  TX_ONABORT { err = err ? err : -1; }
  TX_END
  op_end(); /* only now may others see what it wrote */
  return err;
}

/* ---- the backend: PMDK recovers when the pool is opened ------------------ */

const struct bench_backend bench_backend = {
    .variant = "pmdk",
    .persistent = 1,
    .start = pmdk_start,
    .open = pmdk_open,
    .close = pmdk_close,
    .atomically = pmdk_atomically,
};
