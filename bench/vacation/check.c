/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check.c -- the vacation workload's --check (vac_check), after the
 * driver's recovery (undo rollback, PMDK's transaction rollback).
 *
 * Structure: each table holds ids 1..r once each, in their buckets; every
 * row has its load's total and price, and used + free = total; every
 * customer's list is strictly sorted, each record naming a row at its
 * price; a row's used count equals the records that point at it.
 *
 * Against the stream: every record carries the stamp of the transaction
 * that made it, which must have completed (i < bench_done(t): each one
 * that writes commits with its counter, so none in flight shows), be for
 * that customer and have chosen that row. What a transaction chooses
 * depends on the stream alone; whether it gets the row depends on the
 * availability it met. With one thread the check replays the run, and the
 * records must be exactly the replay's, stamps included. With several it
 * relies on what never goes back: free only falls, records are never
 * removed. So for each completed transaction of thread t and row it chose:
 *  (a) the customer holds that row (reserved by it or before it), or the
 *      row is full now;
 *  (b) a record for that pair by thread t is not from a later operation of
 *      t (this one would have found the row full, and full stays full);
 *  (c) once an operation of t found a row full (no record for its pair),
 *      no later operation of t reserved that row.
 * A counter rewound below the records present breaks the completion rule.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vacation.h"

#define IDX(stamp) ((stamp) & ((UINT64_C(1) << 48) - 1))
#define WHO(stamp) ((unsigned)((stamp) >> 48)) /* thread + 1 */
#define ID(what) ((what)&0xffffffffu)

/* The records as a set of (customer, what) -> stamp, open addressing. */
struct rent {
  uint64_t cust, what, stamp; /* cust 0: empty */
};
struct rmap {
  uint64_t mask, n;
  struct rent *e;
};

static int rmap_init(struct rmap *m, uint64_t n) {
  uint64_t cap = 1024;
  while (cap < 2 * n + 2)
    cap <<= 1;
  m->mask = cap - 1;
  m->n = 0;
  m->e = calloc(cap, sizeof *m->e);
  return m->e ? 0 : -1;
}

/* The entry of (cust, what), or the empty one where it would go. */
static struct rent *rmap_at(const struct rmap *m, uint64_t cust,
                            uint64_t what) {
  uint64_t p = bench_mix64(cust * 0x9e3779b97f4a7c15ull ^ what) & m->mask;
  while (m->e[p].cust && (m->e[p].cust != cust || m->e[p].what != what))
    p = (p + 1) & m->mask;
  return &m->e[p];
}

struct vcheck {
  const struct vac_root *r;
  uint64_t nrel;
  struct vac_node **by_id[VAC_NTAB]; /* [type][id] */
  uint32_t *cnt[3];                  /* records per row */
  struct rmap recs;                  /* the records found */
};

static struct vac_res *row(const struct vcheck *v, unsigned t, uint64_t id) {
  return (struct vac_res *)v->by_id[t][id];
}

/* What operation i of thread t chose (all rows exist after the load). */
static void chosen(const struct vcheck *v, unsigned t, uint64_t i,
                   struct vac_plan *p, uint64_t best[3]) {
  struct bench_op op = bench_op_at(t, i);
  int64_t price[VAC_QUERIES];
  vac_plan(&op, v->nrel, p);
  for (unsigned j = 0; j < p->n; j++)
    price[j] = (int64_t)vac_load_price(p->type[j], p->id[j]);
  vac_choose(p, price, best);
}

static int walk_tables(struct vcheck *v, struct bench_check *c) {
  const struct vac_root *r = v->r;
  for (unsigned t = 0; t < VAC_NTAB; t++) {
    uint64_t count = 0;
    for (uint64_t b = 0; b <= r->tab[t].mask; b++)
      for (struct vac_node *n = r->tab[t].bucket[b]; n; n = n->next) {
        if (n->id - 1 >= v->nrel || vac_bucket(r, t, n->id) != b ||
            v->by_id[t][n->id])
          return bench_fail(c,
                            "table %u: id %" PRIu64 " is foreign, "
                            "misplaced or repeated",
                            t, n->id);
        v->by_id[t][n->id] = n;
        count++;
      }
    if (count != v->nrel)
      return bench_fail(c, "table %u holds %" PRIu64 " of %" PRIu64 " rows", t,
                        count, v->nrel);
  }
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    for (uint64_t id = 1; id <= v->nrel; id++) {
      const struct vac_res *s = row(v, t, id);
      if (s->total != vac_load_total(t, id) ||
          s->price != vac_load_price(t, id) || s->used > s->total ||
          s->used + s->free != s->total)
        return bench_fail(c,
                          "table %u, id %" PRIu64 ": total %" PRIu64
                          ", used %" PRIu64 ", free %" PRIu64,
                          t, id, s->total, s->used, s->free);
    }
  return 0;
}

static int walk_lists(struct vcheck *v, struct bench_check *c) {
  uint64_t n = 0;
  for (uint64_t cu = 1; cu <= v->nrel; cu++) {
    uint64_t prev = 0; /* strictly rising, so the walk ends */
    const struct vac_cust *cs = (struct vac_cust *)v->by_id[VAC_CUST][cu];
    for (const struct vac_rec *e = cs->head; e; prev = e->what, e = e->next)
      if (e->what <= prev)
        return bench_fail(c, "customer %" PRIu64 ": unsorted list", cu);
      else
        n++;
  }
  if (rmap_init(&v->recs, n))
    return bench_fail(c, "out of memory");
  for (uint64_t cu = 1; cu <= v->nrel; cu++) {
    const struct vac_cust *cs = (struct vac_cust *)v->by_id[VAC_CUST][cu];
    for (const struct vac_rec *e = cs->head; e; e = e->next) {
      unsigned t = (unsigned)(e->what >> 32), who = WHO(e->stamp);
      uint64_t id = ID(e->what), best[3];
      struct vac_plan p;
      if (t > VAC_ROOM || id - 1 >= v->nrel ||
          e->price != vac_load_price(t, id))
        return bench_fail(c, "customer %" PRIu64 ": a malformed record", cu);
      if (who - 1 >= bench_cfg->threads || IDX(e->stamp) >= bench_done(who - 1))
        return bench_fail(c,
                          "customer %" PRIu64 ": a record of an operation "
                          "that did not complete",
                          cu);
      chosen(v, who - 1, IDX(e->stamp), &p, best);
      if (p.cust != cu || best[t] != id)
        return bench_fail(c,
                          "customer %" PRIu64 ": a record its operation "
                          "did not choose",
                          cu);
      *rmap_at(&v->recs, cu, e->what) = (struct rent){cu, e->what, e->stamp};
      v->recs.n++;
      v->cnt[t][id]++;
    }
  }
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    for (uint64_t id = 1; id <= v->nrel; id++)
      if (v->cnt[t][id] != row(v, t, id)->used)
        return bench_fail(
            c, "table %u, id %" PRIu64 ": used %" PRIu64 " but %u records", t,
            id, row(v, t, id)->used, v->cnt[t][id]);
  return 0;
}

/* One thread: replay the run; the records must be exactly the replay's. */
static int replay_exact(struct vcheck *v, struct bench_check *c) {
  struct rmap sim = {0};
  uint64_t *avail[3] = {0}, done = bench_done(0);
  int rc = rmap_init(&sim, v->recs.n);
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    rc |= !(avail[t] = calloc(v->nrel + 1, sizeof *avail[t]));
  if (rc)
    rc = bench_fail(c, "out of memory");
  for (unsigned t = VAC_CAR; t <= VAC_ROOM && !rc; t++)
    for (uint64_t id = 1; id <= v->nrel; id++)
      avail[t][id] = vac_load_total(t, id);
  for (uint64_t i = 0; i < done && !rc; i++) {
    struct vac_plan p;
    uint64_t best[3];
    chosen(v, 0, i, &p, best);
    for (unsigned t = VAC_CAR; t <= VAC_ROOM && !rc; t++) {
      uint64_t what = (uint64_t)t << 32 | best[t];
      struct rent *e = rmap_at(&sim, p.cust, what);
      if (!best[t] || e->cust || !avail[t][best[t]])
        continue; /* nothing chosen, held already, or full */
      avail[t][best[t]]--;
      *e = (struct rent){p.cust, what, bench_op_at(0, i).stamp};
      if (++sim.n > v->recs.n || rmap_at(&v->recs, p.cust, what)->stamp !=
                                     e->stamp) /* the map never fills */
        rc = bench_fail(c,
                        "op %" PRIu64 " reserved table %u id %" PRIu64
                        " for customer %" PRIu64 ": not in the pool",
                        i, t, best[t], p.cust);
    }
  }
  if (!rc && sim.n != v->recs.n)
    rc = bench_fail(c,
                    "%" PRIu64 " reservations after %" PRIu64 " ops, "
                    "expected %" PRIu64,
                    v->recs.n, done, sim.n);
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    free(avail[t]);
  free(sim.e);
  return rc;
}

/* Several threads: rules (a) to (c) above. */
static int replay_threads(struct vcheck *v, struct bench_check *c) {
  uint64_t *full[3] = {0}; /* per row: the first op of this thread to find
                              it full, or UINT64_MAX */
  size_t bytes = (v->nrel + 1) * sizeof(uint64_t);
  int rc = 0;
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    rc |= !(full[t] = malloc(bytes));
  if (rc)
    rc = bench_fail(c, "out of memory");
  for (unsigned th = 0; th < bench_cfg->threads && !rc; th++) {
    for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
      memset(full[t], 0xff, bytes);
    for (uint64_t i = 0; i < bench_done(th) && !rc; i++) {
      struct vac_plan p;
      uint64_t best[3];
      chosen(v, th, i, &p, best);
      for (unsigned t = VAC_CAR; t <= VAC_ROOM && !rc; t++) {
        if (!best[t])
          continue;
        const struct rent *e =
            rmap_at(&v->recs, p.cust, (uint64_t)t << 32 | best[t]);
        if (e->cust && WHO(e->stamp) == th + 1 && IDX(e->stamp) > i)
          rc = bench_fail(c,
                          "thread %u op %" PRIu64 " chose what its later "
                          "op reserved",
                          th, i);
        else if (!e->cust && row(v, t, best[t])->free)
          rc = bench_fail(c,
                          "thread %u op %" PRIu64 " did not reserve table "
                          "%u id %" PRIu64 ", which has room",
                          th, i, t, best[t]);
        else if (!e->cust && full[t][best[t]] > i)
          full[t][best[t]] = i;
      }
    }
    for (uint64_t k = 0; k <= v->recs.mask && !rc; k++) {
      const struct rent *e = &v->recs.e[k];
      unsigned t = (unsigned)(e->what >> 32);
      if (e->cust && WHO(e->stamp) == th + 1 &&
          IDX(e->stamp) > full[t][ID(e->what)])
        rc = bench_fail(c,
                        "thread %u reserved table %u id %" PRIu64
                        " after it had found it full",
                        th, t, ID(e->what));
    }
  }
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    free(full[t]);
  return rc;
}

int vac_check(void *root, struct bench_check *c) {
  const struct vac_root *r = root;
  struct vcheck v = {.r = r, .nrel = bench_cfg->keys};
  int rc = r->relations != v.nrel;
  for (unsigned t = 0; t < VAC_NTAB; t++)
    rc |= !r->tab[t].bucket || ((r->tab[t].mask + 1) & r->tab[t].mask);
  if (rc)
    return bench_fail(c, "the root is missing or malformed");
  for (unsigned t = 0; t < VAC_NTAB; t++)
    rc |= !(v.by_id[t] = calloc(v.nrel + 1, sizeof *v.by_id[t]));
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    rc |= !(v.cnt[t] = calloc(v.nrel + 1, sizeof *v.cnt[t]));
  if (rc)
    rc = bench_fail(c, "out of memory");
  if (!rc)
    rc = walk_tables(&v, c);
  if (!rc)
    rc = walk_lists(&v, c);
  if (!rc)
    rc = bench_cfg->threads == 1 ? replay_exact(&v, c) : replay_threads(&v, c);
  for (unsigned t = 0; t < VAC_NTAB; t++)
    free(v.by_id[t]);
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    free(v.cnt[t]);
  free(v.recs.e);
  return rc;
}
