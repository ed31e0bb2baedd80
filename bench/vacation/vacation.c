/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vacation.c -- a travel reservation system after STAMP's vacation (run as
 * -n1 -q80 -u100: every task is make_reservation), one source for every
 * variant of bench/common/bench.h. --keys is the number of relations r:
 * load key k adds car, flight and room k + 1 (each row: id, total, used,
 * free, price, drawn from its id as STAMP draws them) and customer k + 1,
 * each in its own persistent chained hash table keyed by id. A customer
 * holds a sorted list of reservation records (type, id, price, and the
 * stamp of the transaction that made it).
 *
 * Every operation of the run is one make_reservation, its choices drawn
 * from op->rnd: a customer and VAC_QUERIES (STAMP's -n) random rows, both
 * among the first 80% of ids (-q80); for each type it keeps the priciest
 * row queried (prices never change) and reserves it for the customer
 * unless the row is full or the customer already holds it. The locks of
 * the customer and the chosen rows (striped DRAM locks) are taken in one
 * sorted pass and released when the operation ends (two-phase).
 *
 * Crash consistency. A reservation changes a row's used and free counts
 * and links a fresh record into the customer's list: every existing word
 * it writes is logged with PM_UNDO first, the fresh record is written back
 * before the operation returns. The commit point: in the hand variants the
 * driver's one store that empties the thread's undo log, after it has
 * written back the logged ranges and the counter (so the counter and the
 * transaction commit together; a crash before it rolls the transaction
 * back, leaking at most the fresh record); under pmdk the end of the
 * operation's transaction, which snapshots the same ranges. A transaction
 * that reserves nothing writes nothing. So the durable state is always
 * exactly the completed transactions, which check.c verifies. The load
 * publishes each durable row with one 8-byte bucket store. Deleting
 * customers and updating tables (STAMP's other 1%) are left out: they make
 * availability non-monotone, so the several-thread check could not be
 * exact.
 */
#include <stdlib.h>

#include "vacation.h"

static bench_lock *locks; /* DRAM, striped over (table, id) */
static uint64_t nlocks;

static uint64_t next_rnd(uint64_t *s) {
  return bench_mix64(*s += 0x9e3779b97f4a7c15ull);
}

void vac_plan(const struct bench_op *op, uint64_t relations,
              struct vac_plan *p) {
  uint64_t s = op->rnd, q = relations * VAC_QUERY_PCT / 100;
  q = q ? q : 1;
  p->cust = next_rnd(&s) % q + 1;
  p->n = (unsigned)(next_rnd(&s) % VAC_QUERIES) + 1;
  for (unsigned j = 0; j < p->n; j++) {
    uint64_t x = next_rnd(&s);
    p->type[j] = (unsigned)(x % 3);
    p->id[j] = (x >> 8) % q + 1;
  }
}

void vac_choose(const struct vac_plan *p, const int64_t *price,
                uint64_t best[3]) {
  int64_t max[3] = {-1, -1, -1};
  best[VAC_CAR] = best[VAC_FLIGHT] = best[VAC_ROOM] = 0;
  for (unsigned j = 0; j < p->n; j++)
    if (price[j] > max[p->type[j]]) {
      max[p->type[j]] = price[j];
      best[p->type[j]] = p->id[j];
    }
}

uint64_t vac_load_total(unsigned type, uint64_t id) {
  return (bench_mix64(id * VAC_NTAB + type) % 5 + 1) * 100;
}

uint64_t vac_load_price(unsigned type, uint64_t id) {
  return (bench_mix64(~(id * VAC_NTAB + type)) % 5) * 10 + 50;
}

uint64_t vac_bucket(const struct vac_root *r, unsigned type, uint64_t id) {
  return bench_mix64((id * VAC_NTAB + type) ^ 0x6275636b6574ull) &
         r->tab[type].mask;
}

static struct vac_node *find(const struct vac_root *r, unsigned t,
                             uint64_t id) {
  struct vac_node *n = r->tab[t].bucket[vac_bucket(r, t, id)];
  while (n && n->id != id)
    n = n->next;
  return n;
}

static bench_lock *lock_of(unsigned t, uint64_t id) {
  return &locks[bench_mix64(id << 2 | t) & (nlocks - 1)];
}

static int vac_init(void *rootp) {
  struct vac_root *r = rootp;
  uint64_t n = 1;
  while (n < bench_cfg->keys)
    n <<= 1;
  PM_TX_ADD(r, sizeof *r);
  for (unsigned t = 0; t < VAC_NTAB; t++) {
    if (!(r->tab[t].bucket = pm_alloc(n * sizeof(struct vac_node *))))
      return -1;
    PM_FLUSH(r->tab[t].bucket, n * sizeof(struct vac_node *));
    r->tab[t].mask = n - 1;
  }
  PM_FENCE(); /* empty buckets durable before the root names them */
  r->relations = bench_cfg->keys;
  PM_PERSIST(r, sizeof *r);
  return 0;
}

static int vac_attach(void *rootp) {
  (void)rootp;
  nlocks = 1;
  while (nlocks < 4 * bench_cfg->keys && nlocks < (1u << 16))
    nlocks <<= 1;
  return bench_locks_init(&locks, nlocks);
}

/* Load key k: the four rows of id k + 1. Each is durable before the 8-byte
 * bucket store that links it, and a row already present is left alone (its
 * content depends on the id only), so a crash leaves whole rows and a
 * repeated load insert does nothing. */
static int load_rows(struct vac_root *r, uint64_t id) {
  for (unsigned t = 0; t < VAC_NTAB; t++) {
    if (find(r, t, id))
      continue;
    struct vac_node *n = pm_alloc(t == VAC_CUST ? sizeof(struct vac_cust)
                                                : sizeof(struct vac_res));
    if (!n)
      return -1;
    struct vac_node **b = &r->tab[t].bucket[vac_bucket(r, t, id)];
    n->id = id;
    n->next = *b;
    if (t != VAC_CUST) {
      struct vac_res *s = (struct vac_res *)n;
      s->total = s->free = vac_load_total(t, id);
      s->price = vac_load_price(t, id);
    }
    PM_PERSIST(n, t == VAC_CUST ? sizeof(struct vac_cust)
                                : sizeof(struct vac_res));
    PM_TX_ADD(b, sizeof *b);
    *b = n;
    PM_PERSIST(b, sizeof *b);
  }
  return 0;
}

/* Add l to the set held[0..*nh), kept in address order without repeats
 * (stripes may coincide), the order every operation locks in. */
static void lock_set_add(bench_lock **held, unsigned *nh, bench_lock *l) {
  unsigned i = *nh;
  for (unsigned j = 0; j < *nh; j++)
    if (held[j] == l)
      return;
  for (; i > 0 && held[i - 1] > l; i--)
    held[i] = held[i - 1];
  held[i] = l;
  (*nh)++;
}

/* make_reservation. It locks the customer and the chosen rows, all at
 * once in one order, so no two operations wait on each other in a cycle,
 * and releases them at its end (the driver holds them until the commit);
 * prices and the tables' shape never change after the load, so the queries
 * read them unlocked. */
static int vac_op(void *rootp, unsigned tid, const struct bench_op *op,
                  void *scratch) {
  struct vac_root *r = rootp;
  (void)tid;
  (void)scratch;
  if (op->kind == BENCH_INSERT)
    return op->key < r->relations ? load_rows(r, op->key + 1) : -1;
  struct vac_plan p;
  struct vac_res *row[VAC_QUERIES];
  int64_t price[VAC_QUERIES];
  uint64_t best[3];
  vac_plan(op, r->relations, &p);
  for (unsigned j = 0; j < p.n; j++) {
    row[j] = (struct vac_res *)find(r, p.type[j], p.id[j]);
    price[j] = row[j] ? (int64_t)row[j]->price : -1;
  }
  vac_choose(&p, price, best);
  struct vac_cust *cu = (struct vac_cust *)find(r, VAC_CUST, p.cust);
  if (!cu)
    return -1;
  bench_lock *held[4];
  unsigned nh = 0;
  lock_set_add(held, &nh, lock_of(VAC_CUST, p.cust));
  for (unsigned t = VAC_CAR; t <= VAC_ROOM; t++)
    if (best[t])
      lock_set_add(held, &nh, lock_of(t, best[t]));
  for (unsigned i = 0; i < nh; i++)
    bench_lock_acquire(held[i]);

  /* Records made in this operation are fresh: their links are not
   * logged (PM_UNDO's rule), only written back below. */
  struct vac_rec *fresh[3];
  unsigned nf = 0;
  int err = 0;
  for (unsigned t = VAC_CAR; t <= VAC_ROOM && !err; t++) {
    if (!best[t])
      continue;
    struct vac_res *s = NULL;
    for (unsigned j = 0; j < p.n && !s; j++)
      if (p.type[j] == t && p.id[j] == best[t])
        s = row[j];
    uint64_t what = (uint64_t)t << 32 | best[t];
    struct vac_rec **link = &cu->head;
    while (*link && (*link)->what < what)
      link = &(*link)->next;
    if (!s->free || (*link && (*link)->what == what))
      continue; /* full, or the customer holds it already */
    struct vac_rec *n = pm_alloc(sizeof *n);
    if (!n) {
      err = -1; /* the driver rolls back what was logged */
      break;
    }
    PM_UNDO(&s->used, 2 * sizeof s->used);
    s->used++;
    s->free--;
    n->next = *link;
    n->what = what;
    n->price = s->price;
    n->stamp = op->stamp;
    unsigned f = 0;
    while (f < nf && link != &fresh[f]->next)
      f++;
    if (f == nf)
      PM_UNDO(link, sizeof *link);
    *link = n;
    fresh[nf++] = n;
  }
  /* The logged ranges are written back by the driver at commit; the fresh
   * records are ours to write back, and its commit fence orders them. */
  for (unsigned i = 0; i < nf; i++)
    PM_FLUSH(fresh[i], sizeof *fresh[i]);
  for (unsigned i = 0; i < nh; i++)
    bench_lock_release(held[i]);
  return err;
}

static const struct bench_workload vacation = {
    .name = "vacation",
    .root_size = sizeof(struct vac_root),
    .own_compare = 1,
    .op_name = "make_reservation",
    .init = vac_init,
    .attach = vac_attach,
    .op = vac_op,
    .check = vac_check,
};
BENCH_WORKLOAD(vacation);
