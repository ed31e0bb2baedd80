/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tpcc.c -- the new_order transaction of TPC-C as a workload of the
 * benchmark suite, one source for every variant of bench/common/bench.h
 * (schema in tpcc.h, the checker in check.c). Every operation of the run is
 * one new_order: it reads the warehouse, district and customer, takes the
 * district's next order id, appends an order (its lines inline, and a
 * new_order row) to the district, and updates the stock row of each of its
 * 5-15 items. Each district keeps its newest ORDER_CAP orders in a ring of
 * slots and frees the order a new one replaces, so a long run needs bounded
 * room. Load key k is item k with its stock row in every warehouse; init
 * builds the warehouses, districts and customers. Sizes follow --keys:
 * keys items, keys/10000 warehouses (1..10), min(keys, 3000) customers per
 * district.
 *
 * Crash consistency. The hand variants log every existing range new_order
 * changes (d_next_o_id, each stock row, the ring slot) with PM_UNDO before
 * writing it, and flush the fresh order block; the commit point is the
 * driver's store that empties the undo log, which commits the thread's
 * completed-operation counter with it. A crash before it rolls all of them
 * back (the order block leaks until the pool's gc); after it, all is
 * durable. The locks are released, and the replaced order freed, only
 * after the commit, so no thread builds on a write that could still be
 * rolled back. Under pmdk the same PM_UNDO calls snapshot the ranges in the
 * operation's transaction, whose commit is the commit point. A load insert
 * writes rows that are a function of the item id alone and persists them
 * before the driver advances its load cursor, so repeating it after a crash
 * is harmless. After recovery the tables hold exactly the completed
 * transactions, which check.c verifies against a replay of the stream.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpcc.h"

#define NSTRIPES 4096u /* locks over the stock rows */
#define GOLDEN 0x9e3779b97f4a7c15ull

struct tp_geometry tp_g;
/* Locks, a cache line each: per district, per stock stripe. */
struct lock {
  bench_lock l;
} __attribute__((aligned(64)));
static struct lock *dlock, *slock;

/* A pseudo-random word for row (a, b) of the table `salt`. */
static uint64_t h3(uint64_t salt, uint64_t a, uint64_t b) {
  return bench_mix64(bench_cfg->seed ^
                     bench_mix64(salt * GOLDEN ^ bench_mix64(a * GOLDEN + b)));
}

void tp_geometry(void) {
  uint64_t k = bench_cfg->keys, w = k / 10000;
  tp_g.nwh = w < 1 ? 1 : w > MAX_WH ? MAX_WH : w;
  tp_g.ncust = k < MAX_CUST ? k : MAX_CUST;
  tp_g.nitems = k;
  tp_g.c_cust = h3(11, 0, 0) % 1024;
  tp_g.c_item = h3(12, 0, 0) % 8192;
}

/* ---- rows and transactions derived from the stream -------------------- */

struct item tp_item_row(uint64_t i) {
  return (struct item){.price = 100 + h3(1, i, 0) % 9901,
                       .im_id = 1 + h3(2, i, 0) % 10000,
                       .original = h3(3, i, 0) % 10 == 0};
}

struct stock tp_stock_row(uint64_t w, uint64_t i) {
  return (struct stock){.quantity = 10 + h3(4, w, i) % 91,
                        .original = h3(5, w, i) % 10 == 0};
}

struct warehouse tp_wh_row(uint64_t w) {
  return (struct warehouse){.tax = h3(6, w, 0) % 2001, .ytd = 30000000};
}

struct customer tp_cust_row(uint64_t cx) {
  char credit = h3(9, cx, 0) % 10 ? 'G' : 'B';
  return (struct customer){.discount = h3(8, cx, 0) % 5001,
                           .last = h3(10, cx, 0) % 1000,
                           .credit = {credit, 'C'}};
}

uint32_t tp_dist_tax(uint64_t dx) { return h3(7, dx, 0) % 2001; }

static uint64_t draw(uint64_t *s) { return bench_mix64(*s += GOLDEN); }

static uint64_t nurand(uint64_t *s, uint64_t a, uint64_t n, uint64_t c) {
  uint64_t x = draw(s) % (a + 1), y = draw(s) % n;
  return ((x | y) + c) % n;
}

static int taken(const uint64_t *items, uint64_t n, uint64_t i) {
  for (uint64_t k = 0; k < n; k++)
    if (items[k] == i)
      return 1;
  return 0;
}

/* Home warehouse and district from the key, the rest from op->rnd. 1% of
 * lines are supplied by another warehouse. An order's items are distinct,
 * so its stock rows are too (each is logged and locked once). */
void tp_gen_txn(const struct bench_op *op, struct txn *x) {
  uint64_t s = op->rnd;
  x->w = op->key % tp_g.nwh;
  x->d = op->key / tp_g.nwh % DIST_PER_WH;
  x->c = nurand(&s, 1023, tp_g.ncust, tp_g.c_cust);
  x->ol_cnt = MIN_OL + draw(&s) % (MAX_OL - MIN_OL + 1);
  if (x->ol_cnt > tp_g.nitems)
    x->ol_cnt = tp_g.nitems;
  x->all_local = 1;
  for (uint64_t j = 0; j < x->ol_cnt; j++) {
    uint64_t i = nurand(&s, 8191, tp_g.nitems, tp_g.c_item);
    while (taken(x->item, j, i))
      i = (i + 1) % tp_g.nitems;
    x->item[j] = i;
    x->supply[j] = x->w;
    if (tp_g.nwh > 1 && draw(&s) % 100 == 0) {
      x->supply[j] = (x->w + 1 + draw(&s) % (tp_g.nwh - 1)) % tp_g.nwh;
      x->all_local = 0;
    }
    x->qty[j] = 1 + draw(&s) % 10;
  }
}

/* Everything in the order comes from rows new_order only reads, so the op
 * fills it before it takes a lock. */
void tp_fill_order(const struct root *r, const struct bench_op *op,
                   const struct txn *x, struct order *o) {
  uint64_t sum = 0;
  o->stamp = op->stamp;
  o->c_id = (uint32_t)x->c;
  o->w_id = (uint16_t)x->w;
  o->d_id = (uint8_t)x->d;
  o->ol_cnt = (uint8_t)x->ol_cnt;
  o->all_local = (uint8_t)x->all_local;
  for (uint64_t j = 0; j < x->ol_cnt; j++) {
    struct line *l = &o->line[j];
    l->i_id = (uint32_t)x->item[j];
    l->supply_w_id = (uint16_t)x->supply[j];
    l->number = (uint8_t)(j + 1);
    l->quantity = (uint8_t)x->qty[j];
    l->amount = (uint32_t)(x->qty[j] * r->item[x->item[j]].price);
    sum += l->amount;
  }
  uint64_t disc = r->cust[tp_dx(x) * tp_g.ncust + x->c].discount;
  uint64_t tax = r->wh[x->w].tax + r->dist[tp_dx(x)].tax;
  o->total = sum * (10000 - disc) * (10000 + tax) / 100000000;
}

/* ---- the workload ------------------------------------------------------- */

static int tp_init(void *rootp) {
  struct root *r = rootp;
  uint64_t nw = tp_g.nwh, ndist = nw * DIST_PER_WH, ncust = ndist * tp_g.ncust;
  PM_TX_ADD(r, sizeof *r);
  r->wh = pm_alloc(nw * sizeof *r->wh);
  char *dmem = pm_alloc(ndist * sizeof *r->dist + 48); /* blocks: 16-aligned */
  r->dist = (struct district *)(((uintptr_t)dmem + 63) & ~(uintptr_t)63);
  r->cust = pm_alloc(ncust * sizeof *r->cust);
  r->item = pm_alloc(tp_g.nitems * sizeof *r->item);
  struct slot *rings = pm_alloc(ndist * ORDER_CAP * sizeof *rings);
  if (!r->wh || !dmem || !r->cust || !r->item || !rings)
    return -1;
  for (uint64_t w = 0; w < MAX_WH; w++) {
    r->stock[w] = w < nw ? pm_alloc(tp_g.nitems * sizeof(struct stock)) : NULL;
    if (w < nw && !r->stock[w])
      return -1;
  }
  for (uint64_t w = 0; w < nw; w++)
    r->wh[w] = tp_wh_row(w);
  for (uint64_t dx = 0; dx < ndist; dx++)
    r->dist[dx] = (struct district){.next_o_id = 1,
                                    .tax = tp_dist_tax(dx),
                                    .ytd = 3000000,
                                    .ring = rings + dx * ORDER_CAP};
  for (uint64_t cx = 0; cx < ncust; cx++)
    r->cust[cx] = tp_cust_row(cx);
  PM_FLUSH(r->wh, nw * sizeof *r->wh);
  PM_FLUSH(r->dist, ndist * sizeof *r->dist);
  PM_FLUSH(r->cust, ncust * sizeof *r->cust);
  r->nwh = nw;
  r->ncust = tp_g.ncust;
  r->nitems = tp_g.nitems;
  PM_PERSIST(r, sizeof *r); /* its fence covers the tables' flushes */
  return 0;
}

static int tp_attach(void *rootp) {
  (void)rootp;
  tp_geometry();
  uint64_t ndist = tp_g.nwh * DIST_PER_WH;
  if (bench_lock_mem((void **)&dlock, ndist * sizeof *dlock) ||
      bench_lock_mem((void **)&slock, NSTRIPES * sizeof *slock))
    return -1;
  for (uint64_t i = 0; i < ndist; i++)
    bench_lock_init(&dlock[i].l);
  for (unsigned i = 0; i < NSTRIPES; i++)
    bench_lock_init(&slock[i].l);
  return 0;
}

/* Load key i: item i and its stock row in every warehouse. */
static int load_item(struct root *r, uint64_t i) {
  PM_TX_ADD(&r->item[i], sizeof r->item[i]);
  r->item[i] = tp_item_row(i);
  PM_FLUSH(&r->item[i], sizeof r->item[i]);
  for (uint64_t w = 0; w < tp_g.nwh; w++) {
    struct stock *s = &r->stock[w][i];
    PM_TX_ADD(s, sizeof *s);
    *s = tp_stock_row(w, i);
    PM_FLUSH(s, sizeof *s);
  }
  PM_FENCE(); /* durable before the driver advances its load cursor */
  return 0;
}

/* The stock stripes x locks, sorted and distinct. Every transaction takes
 * its district's lock, then its stripes in ascending order: no cycle. */
static unsigned stripes(const struct txn *x, unsigned *st) {
  unsigned n = 0;
  for (uint64_t j = 0; j < x->ol_cnt; j++) {
    unsigned s = (x->supply[j] * tp_g.nitems + x->item[j]) % NSTRIPES, k = n;
    while (k > 0 && st[k - 1] > s)
      k--;
    if (k > 0 && st[k - 1] == s)
      continue;
    memmove(&st[k + 1], &st[k], (n - k) * sizeof *st);
    st[k] = s;
    n++;
  }
  return n;
}

static int tp_op(void *rootp, unsigned tid, const struct bench_op *op,
                 void *scratch) {
  struct root *r = rootp;
  (void)tid;
  (void)scratch;
  if (!(op->stamp >> 48)) /* the load's stamps name no thread */
    return load_item(r, op->key);
  struct txn x;
  tp_gen_txn(op, &x);
  size_t size = tp_order_size(x.ol_cnt);
  struct order *o = pm_alloc(size); /* fresh: needs no undo */
  if (!o)
    return -1;
  tp_fill_order(r, op, &x, o);
  unsigned st[MAX_OL], n = stripes(&x, st);
  uint64_t dx = tp_dx(&x);
  struct district *d = &r->dist[dx];
  bench_lock_acquire(&dlock[dx].l);
  for (unsigned k = 0; k < n; k++)
    bench_lock_acquire(&slock[st[k]].l);

  uint32_t o_id = d->next_o_id;
  PM_UNDO(&d->next_o_id, sizeof d->next_o_id);
  d->next_o_id = o_id + 1;
  o->o_id = o_id;
  PM_FLUSH(o, size); /* the driver fences before it commits */
  for (uint64_t j = 0; j < x.ol_cnt; j++) {
    struct stock *s = &r->stock[x.supply[j]][x.item[j]];
    PM_UNDO(s, sizeof *s);
    s->quantity = tp_take_stock(s->quantity, x.qty[j]);
    s->ytd += (int64_t)x.qty[j];
    s->order_cnt++;
    s->remote_cnt += x.supply[j] != x.w;
  }
  /* The order and its new_order row go in the ring, in place of the
   * district's oldest once it is full. */
  struct slot *sl = &d->ring[o_id % ORDER_CAP];
  struct order *old = sl->o;
  PM_UNDO(sl, sizeof *sl);
  sl->o = o;
  sl->no_o_id = o_id;

  /* Both wait for the commit in the persistent variants. */
  for (unsigned k = n; k-- > 0;)
    bench_lock_release(&slock[st[k]].l);
  bench_lock_release(&dlock[dx].l);
  pm_free(old);
  return 0;
}

static const struct bench_workload tpcc = {
    .name = "tpcc",
    .op_name = "new_order",
    .root_size = sizeof(struct root),
    .set = 0,
    .own_compare = 1,
    .init = tp_init,
    .attach = tp_attach,
    .op = tp_op,
    .check = tp_check,
};
BENCH_WORKLOAD(tpcc);
