/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_pmkit.c -- the backend (backend.h) of the hand variants and of
 * robust mode: hand-adr (BENCH_HAND_ADR: hand-placed clwb and sfence),
 * hand-eadr (BENCH_HAND_EADR: the flushes compiled out) and robust
 * (BENCH_HAND_ADR with BENCH_ROBUST: the pass inserts its own), on the
 * pmkit pool (pool.c) with DRAM locks released at commit (defer.c). An
 * operation that changes several words together logs their old bytes
 * first (PM_UNDO: bench_undo) in the thread's persistent undo log; when it
 * returns, backend_apply writes back every logged range and commits the
 * operation with its counter, or rolls it back if it failed, and
 * undo_recover rolls back what a crash cut off. Entry points:
 * bench_backend, backend_apply, pm_free and bench_undo.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "defer.h"

/* ---- the undo log -------------------------------------------------------- */

/* A thread's undo log (PM_UNDO): entries of {address, length, old bytes
 * padded to 8}, valid up to `used`. An entry is durable before `used`
 * grows over it, so a torn entry is never rolled back; `used` returns to 0
 * (one 8-byte store) when the operation commits or has been rolled back. */
struct undo_ent {
  uint64_t addr, len;
};
struct undo_log {
  uint64_t used;
  char pad[56];
  /* the operation's bytes, then the counter's entry at commit */
  unsigned char data[BENCH_UNDO_BYTES + sizeof(struct undo_ent) + 8];
};

static size_t ent_size(uint64_t len) {
  return sizeof(struct undo_ent) + ((len + 7) & ~(uint64_t)7);
}

static struct undo_log *undo_log_of(unsigned t) {
  struct undo_log *l = bench_hdr->slot[t].undo;
  if (l)
    return l;
  if (pmkit_alloc(bench_pool, sizeof *l, (void **)&l))
    bench_die("no room for thread %u's undo log: %s", t, pmkit_errormsg());
  l->used = 0;
  PM_PERSIST(&l->used, sizeof l->used);
  bench_hdr->slot[t].undo = l; /* a crash before this leaks the block */
  PM_PERSIST(&bench_hdr->slot[t].undo, sizeof bench_hdr->slot[t].undo);
  return l;
}

static void undo_append(struct undo_log *l, const void *p, size_t n) {
  size_t need = ent_size(n);
  struct undo_ent *e = (struct undo_ent *)(l->data + l->used);
  e->addr = (uintptr_t)p;
  e->len = n;
  memcpy(e + 1, p, n);
  PM_PERSIST(e, need); /* the entry, then the length that admits it */
  l->used += need;
  PM_PERSIST(&l->used, sizeof l->used);
}

void bench_undo(const void *p, size_t n) {
  if (!op_cur.in_op)
    bench_die("PM_UNDO outside an operation");
  if (!n)
    return;
  struct undo_log *l = undo_log_of(op_cur.t);
  if (l->used + ent_size(n) > BENCH_UNDO_BYTES)
    bench_die("an operation logged more than %u bytes (BENCH_UNDO_BYTES)",
              BENCH_UNDO_BYTES);
  undo_append(l, p, n);
}

/* Walk the entries of l; NULL if one is malformed. */
static struct undo_ent *undo_next(struct undo_log *l, uint64_t *at) {
  if (*at >= l->used)
    return NULL;
  struct undo_ent *e = (struct undo_ent *)(l->data + *at);
  if (!e->len || e->len > BENCH_UNDO_BYTES ||
      *at + ent_size(e->len) > l->used ||
      !pmkit_in_pool((void *)(uintptr_t)e->addr) ||
      !pmkit_in_pool((char *)(uintptr_t)e->addr + e->len - 1))
    return NULL;
  *at += ent_size(e->len);
  return e;
}

/* Restore the old bytes, newest entry first (a range logged twice ends
 * with its oldest bytes); a crash midway rolls back again. 0 or -1 if the
 * log is malformed (it is then left alone). */
static int undo_rollback(struct undo_log *l) {
  struct undo_ent **ents = malloc(sizeof l->data / 16 * sizeof *ents);
  unsigned n = 0;
  uint64_t at = 0;
  if (!ents)
    bench_die("out of memory for a rollback");
  for (struct undo_ent *e; (e = undo_next(l, &at));)
    ents[n++] = e;
  if (at != l->used || l->used > sizeof l->data) {
    free(ents);
    return -1;
  }
  while (n--) {
    void *dst = (void *)(uintptr_t)ents[n]->addr;
    memcpy(dst, ents[n] + 1, ents[n]->len);
    PM_FLUSH(dst, ents[n]->len);
  }
  free(ents);
  PM_FENCE();
  l->used = 0;
  PM_PERSIST(&l->used, sizeof l->used);
  return 0;
}

/* Write back what the operation logged, then commit it with its counter:
 * the counter is logged too, so the one store that empties the log
 * commits both. */
static void undo_commit(struct undo_log *l, uint64_t *done, uint64_t next) {
  undo_append(l, done, sizeof *done);
  *done = next;
  uint64_t at = 0;
  for (struct undo_ent *e; (e = undo_next(l, &at));)
    PM_FLUSH((void *)(uintptr_t)e->addr, e->len);
  PM_FENCE();
  l->used = 0;
  PM_PERSIST(&l->used, sizeof l->used);
}

/* Recovery: roll back every thread's uncommitted operation. */
static int undo_recover(char *why, size_t wn) {
  for (unsigned t = 0; t < BENCH_MAX_THREADS; t++) {
    struct undo_log *l = bench_hdr->slot[t].undo;
    if (!l || !l->used)
      continue;
    if (!pmkit_in_pool(l) || !pmkit_in_pool((char *)(l + 1) - 1) ||
        undo_rollback(l))
      return snprintf(why, wn, "thread %u's undo log is malformed", t), -1;
  }
  return 0;
}

/* ---- operations ---------------------------------------------------------- */

int backend_apply(const struct bench_op *op, unsigned t, uint64_t *done,
                  uint64_t next, void *scratch) {
  op_begin(t);
  int err = bench_workload->op(bench_root(), t, op, scratch);
  struct undo_log *l = bench_hdr->slot[t].undo;
  if (l && l->used) {
    if (!err)
      undo_commit(l, done, next);
    else if (undo_rollback(l))
      bench_die("thread %u's undo log is malformed", t);
    else
      op_drop_frees(); /* the rolled-back state still refers to them */
  } else if (!err) {
    *done = next; /* only once the operation is durable */
    PM_PERSIST(done, sizeof *done);
  }
  op_end(); /* only now may others see what it wrote */
  return err;
}

void pm_free(void *p) {
  if (!p || op_defer_free(p))
    return;
  pmkit_free(bench_pool, p);
}

/* The variant's name: the three builds share this file. */
#if defined(BENCH_ROBUST)
#define VARIANT "robust"
#elif defined(BENCH_HAND_ADR)
#define VARIANT "hand-adr"
#else
#define VARIANT "hand-eadr"
#endif

const struct bench_backend bench_backend = {
    .variant = VARIANT,
    BENCH_POOL_ENTRIES,
    .rollback = undo_recover,
};
