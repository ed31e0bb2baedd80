/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check.c -- `--check` of the TPC-C workload (tpcc.c): after recovery the
 * tables must hold exactly the new_order transactions the run's counters
 * say completed (bench_done), as a replay of the seeded stream derives
 * them. It checks the rows new_order only reads against their generators;
 * per district, TPC-C's consistency conditions that new_order touches
 * (d_next_o_id - 1 = max(o_id) = max(no_o_id), one new_order row per
 * order, o_ol_cnt lines per order) and that the orders kept are those of
 * the completed transactions that chose the district: all of them, or
 * with more than ORDER_CAP the newest, each thread's in its own order;
 * per stock row, s_ytd, s_order_cnt and s_remote_cnt equal the replay's
 * sums (they commute), and s_quantity equals the replay with one thread and
 * is reachable from the initial quantity with several. A state with more
 * transactions than the counters say (a rewound counter) fails on the
 * district counts and on orders made by operations not yet completed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpcc.h"

#define STAMP_SHIFT 48
#define MAXT 64 /* the driver's thread limit */

struct replay {
  unsigned threads;
  uint64_t ndist;
  int64_t *ytd; /* per stock row, w * nitems + i */
  uint32_t *order_cnt, *remote_cnt;
  int32_t *quantity;    /* one thread only: the exact s_quantity */
  uint64_t *orders;     /* per district: the transactions that chose it */
  uint64_t *cnt;        /* per thread and district: the same, [t][dx]      */
  uint32_t *rank[MAXT]; /* per op of a thread: how many of its earlier
                           transactions chose the same district */
};

static void replay_free(struct replay *rp) {
  free(rp->ytd);
  free(rp->order_cnt);
  free(rp->remote_cnt);
  free(rp->quantity);
  free(rp->orders);
  free(rp->cnt);
  for (unsigned t = 0; t < MAXT; t++)
    free(rp->rank[t]);
}

/* Run the completed transactions of every thread through the tables'
 * counters. */
static int replay(struct replay *rp, struct bench_check *c) {
  uint64_t rows = tp_g.nwh * tp_g.nitems;
  rp->threads = bench_cfg->threads;
  rp->ndist = tp_g.nwh * DIST_PER_WH;
  rp->ytd = calloc(rows, sizeof *rp->ytd);
  rp->order_cnt = calloc(rows, sizeof *rp->order_cnt);
  rp->remote_cnt = calloc(rows, sizeof *rp->remote_cnt);
  rp->quantity = rp->threads == 1 ? malloc(rows * sizeof *rp->quantity) : NULL;
  rp->orders = calloc(rp->ndist, sizeof *rp->orders);
  rp->cnt = calloc(rp->threads * rp->ndist, sizeof *rp->cnt);
  if (!rp->ytd || !rp->order_cnt || !rp->remote_cnt || !rp->orders ||
      !rp->cnt || (rp->threads == 1 && !rp->quantity))
    return bench_fail(c, "out of memory for the replay");
  for (uint64_t row = 0; rp->quantity && row < rows; row++)
    rp->quantity[row] =
        tp_stock_row(row / tp_g.nitems, row % tp_g.nitems).quantity;
  for (unsigned t = 0; t < rp->threads; t++) {
    uint64_t done = bench_done(t);
    if (done && !(rp->rank[t] = malloc(done * sizeof *rp->rank[t])))
      return bench_fail(c, "out of memory for %" PRIu64 " operations", done);
    for (uint64_t i = 0; i < done; i++) {
      struct bench_op op = bench_op_at(t, i);
      struct txn x;
      tp_gen_txn(&op, &x);
      uint64_t dx = tp_dx(&x);
      rp->rank[t][i] = (uint32_t)rp->cnt[t * rp->ndist + dx]++;
      rp->orders[dx]++;
      for (uint64_t j = 0; j < x.ol_cnt; j++) {
        uint64_t row = x.supply[j] * tp_g.nitems + x.item[j];
        rp->ytd[row] += (int64_t)x.qty[j];
        rp->order_cnt[row]++;
        rp->remote_cnt[row] += x.supply[j] != x.w;
        if (rp->quantity)
          rp->quantity[row] = tp_take_stock(rp->quantity[row], x.qty[j]);
      }
    }
  }
  return 0;
}

/* The rows new_order only reads are as init and the load made them. */
static int check_static(const struct root *r, struct bench_check *c) {
  uint64_t ndist = tp_g.nwh * DIST_PER_WH;
  if (r->nwh != tp_g.nwh || r->ncust != tp_g.ncust || r->nitems != tp_g.nitems)
    return bench_fail(c, "the root's sizes do not match --keys");
  if (!r->wh || !r->dist || !r->cust || !r->item || !r->dist[0].ring)
    return bench_fail(c, "a table is missing");
  for (uint64_t w = 0; w < MAX_WH; w++)
    if (!r->stock[w] != (w >= tp_g.nwh))
      return bench_fail(c, "warehouse %" PRIu64 "'s stock table", w);
  for (uint64_t w = 0; w < tp_g.nwh; w++) {
    struct warehouse e = tp_wh_row(w);
    if (memcmp(&r->wh[w], &e, sizeof e))
      return bench_fail(c, "warehouse %" PRIu64 " changed", w);
  }
  for (uint64_t dx = 0; dx < ndist; dx++)
    if (r->dist[dx].tax != tp_dist_tax(dx) || r->dist[dx].ytd != 3000000 ||
        r->dist[dx].ring != r->dist[0].ring + dx * ORDER_CAP)
      return bench_fail(c, "district %" PRIu64 " changed", dx);
  for (uint64_t cx = 0; cx < ndist * tp_g.ncust; cx++) {
    struct customer e = tp_cust_row(cx);
    if (memcmp(&r->cust[cx], &e, sizeof e))
      return bench_fail(c, "customer %" PRIu64 " changed", cx);
  }
  for (uint64_t i = 0; i < tp_g.nitems; i++) {
    struct item e = tp_item_row(i);
    if (memcmp(&r->item[i], &e, sizeof e))
      return bench_fail(c, "item %" PRIu64 " is not as loaded", i);
  }
  return 0;
}

/* The stock rows against the replay. With several threads the order of
 * their updates to a row is unknown, but each subtracts its quantity and
 * may add 91, so initial - s_ytd and s_quantity are 91 apart a whole
 * number of times. */
static int check_stock(const struct root *r, const struct replay *rp,
                       struct bench_check *c, int64_t *ytd, uint64_t *cnt) {
  for (uint64_t w = 0; w < tp_g.nwh; w++)
    for (uint64_t i = 0; i < tp_g.nitems; i++) {
      const struct stock *s = &r->stock[w][i];
      struct stock e = tp_stock_row(w, i);
      uint64_t row = w * tp_g.nitems + i;
      int64_t gap = (int64_t)s->quantity + rp->ytd[row] - e.quantity;
      int ok = s->original == e.original && s->ytd == rp->ytd[row] &&
               s->order_cnt == rp->order_cnt[row] &&
               s->remote_cnt == rp->remote_cnt[row];
      if (rp->quantity)
        ok = ok && s->quantity == rp->quantity[row];
      else
        ok = ok && s->quantity >= 10 && s->quantity <= 100 && gap >= 0 &&
             gap % 91 == 0;
      if (!ok)
        return bench_fail(
            c,
            "stock of item %" PRIu64 " in warehouse %" PRIu64
            ": quantity %d, ytd %" PRId64 ", %u orders, %u "
            "remote; the replay says ytd %" PRId64 ", %u orders, %u remote",
            i, w, s->quantity, s->ytd, s->order_cnt, s->remote_cnt,
            rp->ytd[row], rp->order_cnt[row], rp->remote_cnt[row]);
      *ytd += s->ytd;
      *cnt += s->order_cnt;
    }
  return 0;
}

/* One district: its order count, its ring, and each order kept against
 * the op that made it. Adds the lines kept to *ytd and *cnt. */
static int check_district(const struct root *r, const struct replay *rp,
                          uint64_t dx, struct bench_check *c, int64_t *ytd,
                          uint64_t *cnt) {
  const struct district *d = &r->dist[dx];
  uint64_t n = rp->orders[dx], lo = n > ORDER_CAP ? n - ORDER_CAP + 1 : 1;
  uint64_t first[MAXT], last[MAXT], kept[MAXT] = {0};
  union {
    struct order o;
    char b[sizeof(struct order) + MAX_OL * sizeof(struct line)];
  } e;
  char at[64]; /* for the messages */
  snprintf(at, sizeof at, "district %" PRIu64 " of warehouse %" PRIu64,
           dx % DIST_PER_WH, dx / DIST_PER_WH);
  if (d->next_o_id != n + 1)
    return bench_fail(c,
                      "%s: d_next_o_id is %u, but %" PRIu64 " completed "
                      "transactions chose it",
                      at, d->next_o_id, n);
  for (uint64_t s = 0; n < ORDER_CAP && s < ORDER_CAP; s++)
    if ((s == 0 || s > n) && (d->ring[s].o || d->ring[s].no_o_id))
      return bench_fail(c, "%s holds an order beyond d_next_o_id", at);
  for (uint64_t id = lo; id <= n; id++) {
    const struct slot *sl = &d->ring[id % ORDER_CAP];
    const struct order *o = sl->o;
    if (!o || o->o_id != id || sl->no_o_id != id)
      return bench_fail(c,
                        "%s: order %" PRIu64 " or its new_order row is "
                        "missing",
                        at, id);
    unsigned t = (unsigned)(o->stamp >> STAMP_SHIFT) - 1;
    uint64_t i = o->stamp & ((1ull << STAMP_SHIFT) - 1);
    if (t >= rp->threads || i >= bench_done(t))
      return bench_fail(c,
                        "%s: order %" PRIu64 " was made by thread %u's op "
                        "%" PRIu64 ", which has not completed",
                        at, id, t, i);
    struct bench_op op = bench_op_at(t, i);
    struct txn x;
    tp_gen_txn(&op, &x);
    memset(&e, 0, sizeof e);
    tp_fill_order(r, &op, &x, &e.o);
    e.o.o_id = (uint32_t)id;
    if (tp_dx(&x) != dx || memcmp(o, &e.o, tp_order_size(x.ol_cnt)))
      return bench_fail(c,
                        "%s: order %" PRIu64 " is not what thread %u's op "
                        "%" PRIu64 " made",
                        at, id, t, i);
    if (kept[t] && i <= last[t])
      return bench_fail(c,
                        "%s: order %" PRIu64 " (thread %u's op %" PRIu64
                        ") is out of its thread's order",
                        at, id, t, i);
    if (!kept[t]++)
      first[t] = i;
    last[t] = i;
    for (uint64_t j = 0; j < o->ol_cnt; j++)
      *ytd += o->line[j].quantity;
    *cnt += o->ol_cnt;
  }
  /* Each thread's orders kept are its latest on this district: as many as
   * it has from the first kept on. With n <= ORDER_CAP, the counts adding
   * up to n makes that all of them. */
  for (unsigned t = 0; t < rp->threads; t++)
    if (kept[t] &&
        rp->cnt[t * rp->ndist + dx] - rp->rank[t][first[t]] != kept[t])
      return bench_fail(c, "%s: thread %u's orders kept are not its latest", at,
                        t);
  return 0;
}

int tp_check(void *rootp, struct bench_check *c) {
  const struct root *r = rootp;
  struct replay rp = {0};
  int64_t stock_ytd = 0, line_ytd = 0;
  uint64_t stock_cnt = 0, line_cnt = 0, wrapped = 0;
  int rc = check_static(r, c) || replay(&rp, c) ? -1 : 0;
  for (uint64_t dx = 0; !rc && dx < rp.ndist; dx++) {
    rc = check_district(r, &rp, dx, c, &line_ytd, &line_cnt);
    wrapped |= rp.orders[dx] > ORDER_CAP;
  }
  if (!rc)
    rc = check_stock(r, &rp, c, &stock_ytd, &stock_cnt);
  /* TPC-C's totals: while every order is kept, the stock's sums are the
   * order lines' (implied by the above, but cheap to state). */
  if (!rc && !wrapped && (stock_ytd != line_ytd || stock_cnt != line_cnt))
    rc = bench_fail(c,
                    "the stock counts %" PRId64 " items in %" PRIu64
                    " lines, the orders %" PRId64 " in %" PRIu64,
                    stock_ytd, stock_cnt, line_ytd, line_cnt);
  replay_free(&rp);
  return rc;
}
