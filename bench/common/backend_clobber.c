/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_clobber.c -- the backend (backend.h) of clobber mode's builds
 * (BENCH_CLOBBER, with BENCH_HAND_ADR or BENCH_HAND_EADR; the variant's
 * name in BENCH_VARIANT_NAME): clobber-adr, clobber-eadr, undo-adr,
 * undo-eadr and their -traced builds, on the pmkit pool (pool.c) with DRAM
 * locks released at commit (defer.c). Every operation and its counter
 * update are one PMKIT_FASE function, op_fase, which the clobber pass
 * instruments on the whole program (bench_fase_whole_program); after a
 * crash clobber_resume has pmkit_recover re-execute the interrupted calls
 * (the undo setting rolls them back), and checks that each one began is
 * complete. Entry points: bench_backend, backend_apply and pm_free.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "defer.h"

/* Set while recovery re-executes operations, one after the other on this
 * thread: each releases its locks as it ends (no other thread runs). */
static int clobber_recovering;

/* Clobber mode: the operation and its counter form one FASE; recovery
 * re-executes it with these arguments (scratch: its length only). The
 * counter is only written, and nothing else the operation touches is it
 * (restrict), so its write is no clobber write. pmkit_recover finds the
 * FASE by its name (clobber_resume). */
PMKIT_FASE PMKIT_FASE_SCRATCH(7, 8) static int op_fase(
    void *root, unsigned t, uint64_t kind, uint64_t key, uint64_t stamp,
    uint64_t rnd, void *scratch, uint64_t scratch_len, uint64_t *restrict done,
    uint64_t next) {
  (void)scratch_len;
  struct bench_op op = {(int)kind, key, stamp, rnd};
  op_begin(t);
  int err = bench_workload->op(root, t, &op, scratch);
  if (!err)
    *done = next;
  if (clobber_recovering)
    op_end(); /* the next interrupted operation may need the same locks */
  return err;
}

int backend_apply(const struct bench_op *op, unsigned t, uint64_t *done,
                  uint64_t next, void *scratch) {
  op_begin(t);
  int err = op_fase(bench_root(), t, (uint64_t)op->kind, op->key, op->stamp,
                    op->rnd, scratch, bench_cfg->value_size, done, next);
  if (err) /* a FASE cannot be rolled back: its partial work is committed */
    bench_die("thread %u: an operation failed inside a FASE", t);
  op_end();
  return err;
}

/* A FASE's frees: the runtime applies them at commit. */
void pm_free(void *p) {
  if (p)
    pmkit_free(bench_pool, p);
}

/* ---- recovery ------------------------------------------------------------ */

/* FASEs the last recovery re-executed, and rolled back (undo setting). */
static unsigned clobber_reexecuted, clobber_rolled_back;

/* Finish FASEs a crash interrupted (after attach: they take its locks).
 * Every operation whose FASE had begun must be complete afterwards, its
 * counter at the value the call was to store (the undo setting rolls it
 * back instead: the checks that follow see it as never begun). */
static int clobber_resume(char *why, size_t wn) {
  struct {
    uint64_t *done, next;
  } begun[PMKIT_MAX_THREADS];
  unsigned nbegun = 0, nundo = 0;
  for (unsigned s = 0; s < PMKIT_MAX_THREADS; s++) {
    pmkit_clobber_inflight f;
    int r = pmkit_clobber_inflight_get(bench_pool, s, &f);
    if (r < 0)
      return snprintf(why, wn, "slot %u: %s", s, pmkit_errormsg()), -1;
    if (r == 0)
      continue;
    if (f.undo) {
      nundo++;
      continue;
    }
    if (!f.name || strcmp(f.name, "op_fase") || f.nargs != 10)
      return snprintf(why, wn, "slot %u: an unknown FASE in flight", s), -1;
    begun[nbegun].done = (uint64_t *)(uintptr_t)f.args[8];
    begun[nbegun++].next = f.args[9];
  }
  clobber_recovering = 1;
  int n = pmkit_recover(bench_pool);
  clobber_recovering = 0;
  if (n < 0)
    return snprintf(why, wn, "recovery failed: %s", pmkit_errormsg()), -1;
  if ((unsigned)n != nbegun + nundo)
    return snprintf(why, wn, "recovery handled %d FASEs, %u were in flight", n,
                    nbegun + nundo),
           -1;
  for (unsigned i = 0; i < nbegun; i++)
    if (*begun[i].done != begun[i].next)
      return snprintf(why, wn,
                      "the interrupted operation %" PRIu64
                      " began but recovery did not complete it (its "
                      "counter is %" PRIu64 ")",
                      begun[i].next - 1, *begun[i].done),
             -1;
  clobber_reexecuted = nbegun;
  clobber_rolled_back = nundo;
  return 0;
}

static void clobber_note(char *buf, size_t n) {
  snprintf(buf, n,
           "; recovery re-executed %u interrupted FASE(s), rolled back %u",
           clobber_reexecuted, clobber_rolled_back);
}

/* ---- the JSON line: the log per operation -------------------------------- */

static pmkit_clobber_stats window[2];

static void clobber_sample(int edge) { pmkit_clobber_stats_get(&window[edge]); }

/* FASEs counted over the same window as the operations; ratios, so the
 * window's edges do not matter. */
static void clobber_json_fields(char *buf, size_t n) {
  const pmkit_clobber_stats *c0 = &window[0], *c1 = &window[1];
  double nf = c1->fases > c0->fases ? (double)(c1->fases - c0->fases) : 0;
  buf[0] = 0;
  if (nf > 0)
    snprintf(buf, n,
             ", \"log_entries_per_op\": %.3f, \"log_bytes_per_op\": %.1f, "
             "\"vlog_bytes_per_op\": %.1f, \"fences_per_op\": %.3f",
             (double)(c1->entries - c0->entries) / nf,
             (double)(c1->log_bytes - c0->log_bytes) / nf,
             (double)(c1->vlog_bytes - c0->vlog_bytes) / nf,
             (double)(c1->fences - c0->fences) / nf);
}

/* ---- the backend --------------------------------------------------------- */

const struct bench_backend bench_backend = {
    .variant = BENCH_VARIANT_NAME,
    BENCH_POOL_ENTRIES,
    .resume = clobber_resume,
    .sample = clobber_sample,
    .json_fields = clobber_json_fields,
    .recovery_note = clobber_note,
};
