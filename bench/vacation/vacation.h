/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vacation.h -- the persistent layout of the vacation workload and the
 * pure functions that both the transactions (vacation.c) and the checker
 * (check.c) derive from the seeded stream: what the load gives each row,
 * and what a transaction chooses. Prices and the tables' shape never change
 * after the load, so a transaction's choice depends on its op alone.
 */
#ifndef PMKIT_BENCH_VACATION_H
#define PMKIT_BENCH_VACATION_H

#include "bench.h"

#define VAC_QUERIES 1    /* STAMP's -n: queries per transaction, at most */
#define VAC_QUERY_PCT 80 /* STAMP's -q: the share of ids transactions use */

enum { VAC_CAR, VAC_FLIGHT, VAC_ROOM, VAC_CUST, VAC_NTAB };

struct vac_node { /* the hash-chain header of every row */
  uint64_t id;    /* 1..relations */
  struct vac_node *next;
};
struct vac_res { /* a car, flight or room */
  struct vac_node h;
  uint64_t total, used, free, price; /* used, free: one logged range */
};
struct vac_rec { /* a reservation, in its customer's list sorted by what */
  struct vac_rec *next;
  uint64_t what;  /* type << 32 | id */
  uint64_t price; /* the row's, as STAMP bills it */
  uint64_t stamp; /* of the transaction that made it */
};
struct vac_cust {
  struct vac_node h;
  struct vac_rec *head;
};
struct vac_root {
  uint64_t relations;
  struct {
    uint64_t mask; /* buckets - 1, a power of two >= relations */
    struct vac_node **bucket;
  } tab[VAC_NTAB];
};

/* One transaction's choices before it looks at any row: its customer and
 * n queries (type, id). */
struct vac_plan {
  uint64_t cust;
  unsigned n;
  unsigned type[VAC_QUERIES];
  uint64_t id[VAC_QUERIES];
};

void vac_plan(const struct bench_op *op, uint64_t relations,
              struct vac_plan *p);
/* STAMP's choice: per type, the first of the priciest rows queried
 * (price[j] of query j, -1 if absent); best[type] = its id, or 0. */
void vac_choose(const struct vac_plan *p, const int64_t *price,
                uint64_t best[3]);
/* The total and price the load gives a row, drawn as STAMP draws them. */
uint64_t vac_load_total(unsigned type, uint64_t id);
uint64_t vac_load_price(unsigned type, uint64_t id);
uint64_t vac_bucket(const struct vac_root *r, unsigned type, uint64_t id);

/* The workload's check (check.c). */
int vac_check(void *root, struct bench_check *c);

#endif /* PMKIT_BENCH_VACATION_H */
