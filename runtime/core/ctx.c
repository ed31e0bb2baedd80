/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctx.c -- persistent per-thread context slots and the state machine of a
 * failure-atomic section (IDLE -> ACTIVE -> IDLE). A slot's
 * persistent contents (state, tag, allocation journal, runtime extension
 * words) outlive the process; which thread holds it is volatile and per run,
 * so after a crash recovery can adopt a slot whose section was in flight.
 * The allocation journal itself lives in heap_journal.c. Entry points:
 * pmkit_ctx_get, pmkit_fase_begin, pmkit_fase_commit, and pmkit_recover,
 * which hands each slot in flight to the runtime that owns it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

void pmk_registry_add(struct pmk_registry *r, const void *t, size_t stride,
                      uint32_t n, const char *mode) {
  pthread_mutex_lock(&r->lock);
  for (uint32_t i = 0; i < n; i++) {
    const struct pmk_fase_head *e =
        (const void *)((const char *)t + i * stride);
    for (uint32_t j = 0; j < r->n; j++)
      if (r->fase[j]->id == e->id && r->fase[j] != e) {
        fprintf(stderr,
                "pmkit %s: FASEs %s and %s have the same id %#llx: rename "
                "one\n",
                mode, r->fase[j]->name, e->name, (unsigned long long)e->id);
        abort();
      }
    if (r->n == PMK_MAX_FASES) {
      fprintf(stderr, "pmkit %s: more than %u FASEs in one program\n", mode,
              PMK_MAX_FASES);
      abort();
    }
    r->fase[r->n] = e;
    atomic_store_explicit(&r->n, r->n + 1, memory_order_release);
  }
  pthread_mutex_unlock(&r->lock);
}

void pmk_fase_fail(const char *mode, const struct pmk_fase_head *fase,
                   const char *what, const char *detail) {
  fprintf(stderr, "pmkit %s: FASE %s: %s%s%s\n", mode, fase ? fase->name : "?",
          what, detail && *detail ? ": " : "", detail ? detail : "");
  abort();
}

const void *pmk_registry_find(struct pmk_registry *r, uint64_t id) {
  uint32_t n = atomic_load_explicit(&r->n, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (r->fase[i]->id == id)
      return r->fase[i];
  return NULL;
}

static int claim(pmkit_pool *p, unsigned id) {
  int zero = 0;
  return atomic_compare_exchange_strong(&p->claimed[id], &zero, 1);
}

int pmkit_ctx_get(pmkit_pool *p, pmkit_ctx **out) {
  pmk_clear_err();
  if (!p || !out)
    return pmk_err(PMKIT_E_INVAL, "pmkit_ctx_get: NULL argument");
  struct pmk_tc *tc = pmk_tc(p);
  if (!tc)
    return pmk_err(PMKIT_E_NOMEM, "no memory for thread state");
  if (tc->ctx) {
    *out = tc->ctx;
    return 0;
  }
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
    if (pmk_ctx_state(&p->ctxs[i]) != PMK_CTX_IDLE || !claim(p, i))
      continue;
    tc->ctx = &p->ctx[i];
    *out = tc->ctx;
    return 0;
  }
  return pmk_err(PMKIT_E_NOSPC,
                 "all %u thread context slots are in use or await recovery",
                 PMKIT_MAX_THREADS);
}

int pmkit_ctx_adopt(pmkit_pool *p, unsigned id, pmkit_ctx **out) {
  pmk_clear_err();
  if (!p || !out || id >= PMKIT_MAX_THREADS)
    return pmk_err(PMKIT_E_INVAL, "pmkit_ctx_adopt: bad argument");
  if (!claim(p, id))
    return pmk_err(PMKIT_E_BUSY, "context slot %u is held by another thread",
                   id);
  *out = &p->ctx[id];
  return 0;
}

int pmkit_ctx_release(pmkit_ctx *c) {
  if (!c)
    return pmk_err(PMKIT_E_INVAL, "pmkit_ctx_release: NULL context");
  struct pmk_tc *tc = pmk_tc(c->pool);
  if (tc && tc->ctx == c)
    tc->ctx = NULL;
  if (tc && tc->fase == c)
    tc->fase = NULL;
  atomic_store(&c->pool->claimed[c->id], 0);
  return 0;
}

unsigned pmkit_ctx_id(const pmkit_ctx *c) { return c->id; }

pmkit_ctx_state pmkit_ctx_state_of(const pmkit_ctx *c) {
  return pmk_ctx_state(c->pm) == PMK_CTX_ACTIVE ? PMKIT_CTX_ACTIVE
                                                : PMKIT_CTX_IDLE;
}

int pmkit_ctx_peek(pmkit_pool *p, unsigned id, pmkit_ctx_state *state) {
  pmk_clear_err();
  if (!p || !state || id >= PMKIT_MAX_THREADS)
    return pmk_err(PMKIT_E_INVAL, "pmkit_ctx_peek: bad argument");
  *state = pmkit_ctx_state_of(&p->ctx[id]);
  return 0;
}

uint64_t *pmkit_ctx_ext(pmkit_ctx *c) { return c->pm->ext; }

static int fase_thread(pmkit_ctx *c, struct pmk_tc **tcp) {
  if (!c)
    return pmk_err(PMKIT_E_INVAL, "NULL context");
  if (c->pool->flags & PMKIT_POOL_INSPECT)
    return pmk_err(PMKIT_E_STATE, "pool is open for inspection only");
  *tcp = pmk_tc(c->pool);
  if (!*tcp)
    return pmk_err(PMKIT_E_NOMEM, "no memory for thread state");
  return 0;
}

int pmkit_fase_begin(pmkit_ctx *c, uint64_t tag) {
  pmk_clear_err();
  struct pmk_tc *tc;
  int r = fase_thread(c, &tc);
  if (r)
    return r;
  if (pmk_ctx_state(c->pm) != PMK_CTX_IDLE || tc->fase)
    return pmk_err(PMKIT_E_STATE,
                   "context %u: a section is already in "
                   "flight",
                   c->id);
  /* Tag, number and state share the slot's first line (with the extension
   * words a runtime may have set for this section): one write-back, one
   * fence, which orders all of it before the section's writes. The state
   * word's check stands for the order among them (pmk_active_word). */
  struct pmk_ctx_pm *pm = c->pm;
  uint64_t seq = pm->seq + 1; /* the journal's entries check against it */
  pmk_store64_line(&pm->tag, tag);
  pmk_store64_line(&pm->seq, seq);
  pmk_store64_line(&pm->state, pmk_active_word(tag, seq));
  pmk_flush_line(&pm->state);
  pmk_fence();
  tc->fase = c;
  tc->replay = 0;
  tc->rcur = 0;
  tc->nj = 0;
  tc->nfrees = 0;
  return 0;
}

int pmkit_fase_replay(pmkit_ctx *c) {
  pmk_clear_err();
  struct pmk_tc *tc;
  int r = fase_thread(c, &tc);
  if (r)
    return r;
  if (pmk_ctx_state(c->pm) != PMK_CTX_ACTIVE)
    return pmk_err(PMKIT_E_STATE, "context %u: no section to replay", c->id);
  tc->fase = c;
  tc->replay = 1;
  tc->rcur = 0;
  tc->nj = pmk_journal_count(c->pm);
  tc->nfrees = 0;
  return 0;
}

int pmkit_fase_commit(pmkit_ctx *c) {
  pmk_clear_err();
  struct pmk_tc *tc;
  int r = fase_thread(c, &tc);
  if (r)
    return r;
  if (pmk_ctx_state(c->pm) != PMK_CTX_ACTIVE || tc->fase != c)
    return pmk_err(PMKIT_E_STATE,
                   "context %u: no section in flight on this "
                   "thread",
                   c->id);
  /* A re-execution that made fewer allocations and frees than the
   * interrupted one: the rest of the journal is not its work. */
  if (tc->replay && tc->rcur < tc->nj)
    pmk_journal_release(c->pool, c->pm, tc->rcur);
  tc->fase = NULL;
  tc->replay = 0;
  /* One ordered store; the journal's entries no longer count (the slot is
   * IDLE, and the next section's number makes their checks fail). */
  pmk_store64(&c->pm->state, PMK_CTX_IDLE);
  pmk_fence();
  pmk_fase_frees_apply(c->pool, tc);
  return 0;
}

int pmkit_fase_abort(pmkit_ctx *c) {
  pmk_clear_err();
  struct pmk_tc *tc;
  int r = fase_thread(c, &tc);
  if (r)
    return r;
  if (pmk_ctx_state(c->pm) != PMK_CTX_ACTIVE)
    return pmk_err(PMKIT_E_STATE, "context %u: no section to abort", c->id);
  if (tc->fase == c)
    tc->fase = NULL;
  tc->replay = 0;
  tc->nfrees = 0;
  pmk_journal_release(c->pool, c->pm, 0);
  pmk_store64(&c->pm->state, PMK_CTX_IDLE);
  pmk_fence();
  return 0;
}

uint64_t pmkit_fase_tag(const pmkit_ctx *c) { return c->pm->tag; }

int pmkit_recover(pmkit_pool *p) {
  pmk_clear_err();
  if (!p)
    return pmk_err(PMKIT_E_INVAL, "pmkit_recover: NULL pool");
  if (p->flags & PMKIT_POOL_INSPECT)
    return pmk_err(PMKIT_E_STATE, "pool is open for inspection only");
  /* Each mode's recovery once, in ascending recover_order (stable: ties in
   * the table's order). */
  unsigned nmodes = 0;
  while (pmk_modes[nmodes])
    nmodes++;
  int n = 0;
  for (unsigned done = 0, order = 0; done < nmodes; order++)
    for (unsigned i = 0; i < nmodes; i++) {
      const struct pmk_mode *m = pmk_modes[i];
      if (m->recover_order != order)
        continue;
      done++;
      if (!m->recover)
        continue;
      int r = m->recover(p);
      if (r < 0)
        return r;
      n += r;
    }
  return n;
}

uint64_t pmk_fase_journaled(pmkit_pool *p) { return pmk_tc(p)->nj; }

void pmk_fase_replay_from(pmkit_pool *p, uint64_t entry) {
  pmk_tc(p)->rcur = entry;
}
