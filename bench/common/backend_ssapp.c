/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_ssapp.c -- the backend (backend.h) of ssapp mode's builds
 * (BENCH_SSAPP with BENCH_HAND_EADR; the variant's name in
 * BENCH_VARIANT_NAME): ssapp, ssapp-compiler, ssapp-crash and
 * ssapp-nosplit-crash, on the pmkit pool (pool.c). Every operation and its
 * counter update are one PMKIT_FASE function, op_fase, which the ssapp
 * pass instruments on the whole program (bench_fase_whole_program) and
 * which recovery resumes where a crash interrupted it. So that a resumed
 * operation finds what it had, its locks are PM locks (pmkit_mutex, bench.h)
 * in arrays the pool keeps in the run header (ssapp_lock_mem), released at
 * once, and its scratch buffer is in the pool. Entry points: bench_backend,
 * backend_apply and pm_free.
 */
#include <stdio.h>

#include "backend.h"

/* SSAPP mode: the operation and its counter form one FASE, which recovery
 * resumes where a crash interrupted it. scratch is the thread's buffer in
 * the pool (a resumed operation may copy from what it built there). */
PMKIT_FASE static int op_fase(void *root, unsigned t, uint64_t kind,
                              uint64_t key, uint64_t stamp, uint64_t rnd,
                              void *scratch, uint64_t *done, uint64_t next) {
  struct bench_op op = {(int)kind, key, stamp, rnd};
  int err = bench_workload->op(root, t, &op, scratch);
  if (!err)
    *done = next;
  return err;
}

int backend_apply(const struct bench_op *op, unsigned t, uint64_t *done,
                  uint64_t next, void *scratch) {
  int err = op_fase(bench_root(), t, (uint64_t)op->kind, op->key, op->stamp,
                    op->rnd, scratch, done, next);
  if (err) /* a FASE cannot be rolled back: its partial work is committed */
    bench_die("thread %u: an operation failed inside a FASE", t);
  return err;
}

/* A FASE's frees: the runtime applies them at commit. */
void pm_free(void *p) {
  if (p)
    pmkit_free(bench_pool, p);
}

/* The thread's scratch buffer in the pool, allocated on its first run. */
static void *ssapp_scratch(unsigned t) {
  if (!bench_hdr->slot[t].scratch) {
    void *b;
    if (pmkit_zalloc(bench_pool, bench_cfg->value_size, &b))
      bench_die("no room for thread %u's scratch buffer", t);
    bench_hdr->slot[t].scratch = b;
  }
  return bench_hdr->slot[t].scratch;
}

/* ---- locks ------------------------------------------------------------------
 * The k-th call of a run gets the k-th block of the pool, allocated on the
 * first run: an interrupted operation's locks are where recovery looks for
 * them (zeroed memory is a free lock; a crashed run's are reset). */
static unsigned lock_mem_calls; /* in this attach */

static void ssapp_attach(void) { lock_mem_calls = 0; }

static int ssapp_lock_mem(void **mem, size_t bytes) {
  unsigned k = lock_mem_calls++;
  if (k >= sizeof bench_hdr->lockarr / sizeof bench_hdr->lockarr[0])
    bench_die("more lock arrays than the run header has room for");
  if (!bench_hdr->lockarr[k].mem || bench_hdr->lockarr[k].bytes != bytes) {
    void *a;
    /* blocks are 16-aligned: room to round up to 64 */
    if (pmkit_zalloc(bench_pool, bytes + 48, &a))
      return -1;
    bench_hdr->lockarr[k].bytes = bytes;
    /* a crash before this leaks the block */
    bench_hdr->lockarr[k].mem = (void *)(((uintptr_t)a + 63) & ~(uintptr_t)63);
  }
  *mem = bench_hdr->lockarr[k].mem;
  return 0;
}

/* ---- recovery ------------------------------------------------------------ */

/* FASEs the last recovery resumed. */
static int ssapp_resumed;

/* Finish the operations a crash interrupted (after attach: they take its
 * locks). */
static int ssapp_resume(char *why, size_t wn) {
  int n = pmkit_recover(bench_pool);
  if (n < 0)
    return snprintf(why, wn, "recovery failed: %s", pmkit_errormsg()), -1;
  ssapp_resumed = n;
  return 0;
}

static void ssapp_note(char *buf, size_t n) {
  snprintf(buf, n, "; recovery resumed %d interrupted FASE(s)", ssapp_resumed);
}

/* ---- the backend --------------------------------------------------------- */

const struct bench_backend bench_backend = {
    .variant = BENCH_VARIANT_NAME,
    BENCH_POOL_ENTRIES,
    .attach = ssapp_attach,
    .resume = ssapp_resume,
    .lock_mem = ssapp_lock_mem,
    .scratch = ssapp_scratch,
    .recovery_note = ssapp_note,
};
