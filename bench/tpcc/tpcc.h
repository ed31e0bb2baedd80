/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tpcc.h -- the schema of the TPC-C workload (tpcc.c runs new_order on it,
 * check.c verifies it after a crash) and what both derive from the seeded
 * stream: the initial rows, each transaction's input and the order it
 * makes. Money is in cents, rates in basis points; ids are 0-based except
 * order ids, which start at 1 as d_next_o_id does.
 */
#ifndef PMKIT_BENCH_TPCC_H
#define PMKIT_BENCH_TPCC_H

#include "bench.h"

enum {
  DIST_PER_WH = 10,
  MAX_WH = 10,
  MAX_CUST = 3000, /* customers per district */
  MIN_OL = 5,
  MAX_OL = 15,
  ORDER_CAP = 1024, /* orders kept per district: a power of two */
};

/* No row has implicit padding, so a whole order compares with memcmp. */
struct warehouse {
  uint32_t tax, pad;
  int64_t ytd;
};
struct district {
  uint32_t next_o_id, tax;
  int64_t ytd;
  struct slot *ring; /* ORDER_CAP slots; order o_id sits at o_id % CAP */
  uint64_t pad[5];   /* a cache line each: every new_order writes one */
};
struct customer {
  uint32_t discount;
  uint16_t last; /* the number c_last's syllables are made of */
  char credit[2];
};
struct item {
  uint32_t price, im_id, original, pad;
};
struct stock {
  int32_t quantity;
  uint32_t order_cnt, remote_cnt, original;
  int64_t ytd;
};
struct line {
  uint32_t i_id;
  uint16_t supply_w_id;
  uint8_t number, quantity;
  uint32_t amount, delivery_d;
};
struct order {
  uint64_t stamp; /* the op that made it (bench_op.stamp), for the check */
  uint32_t o_id, c_id;
  uint16_t w_id;
  uint8_t d_id, ol_cnt, all_local, carrier_id; /* carrier 0: none yet */
  uint16_t pad;
  uint64_t total; /* what the terminal is told, from the rows read */
  struct line line[];
};
/* An order and its new_order row: no_o_id, 0 when there is none. */
struct slot {
  struct order *o;
  uint64_t no_o_id;
};

struct root {
  uint64_t nwh, ncust, nitems;
  struct warehouse *wh;
  struct district *dist; /* nwh * DIST_PER_WH, 64-byte aligned */
  struct customer *cust; /* ncust per district */
  struct item *item;
  struct stock *stock[MAX_WH]; /* per warehouse, nitems */
};

/* The sizes --keys implies (tp_geometry), and the run's NURand constants. */
struct tp_geometry {
  uint64_t nwh, ncust, nitems, c_cust, c_item;
};
extern struct tp_geometry tp_g;
void tp_geometry(void);

/* The initial rows: functions of the id and the seed. */
struct item tp_item_row(uint64_t i);
struct stock tp_stock_row(uint64_t w, uint64_t i);
struct warehouse tp_wh_row(uint64_t w);
struct customer tp_cust_row(uint64_t cx);
uint32_t tp_dist_tax(uint64_t dx);

/* A new_order's input, a function of its op. */
struct txn {
  uint64_t w, d, c, ol_cnt, all_local;
  uint64_t item[MAX_OL], supply[MAX_OL], qty[MAX_OL];
};
void tp_gen_txn(const struct bench_op *op, struct txn *x);
static inline uint64_t tp_dx(const struct txn *x) {
  return x->w * DIST_PER_WH + x->d;
}
static inline size_t tp_order_size(uint64_t ol_cnt) {
  return sizeof(struct order) + ol_cnt * sizeof(struct line);
}
/* Fill the order x makes, all but o_id (which the block keeps). */
void tp_fill_order(const struct root *r, const struct bench_op *op,
                   const struct txn *x, struct order *o);
/* TPC-C's stock rule: a quantity in [10, 100] stays there. */
static inline int32_t tp_take_stock(int32_t q, uint64_t qty) {
  int32_t n = (int32_t)qty;
  return q >= n + 10 ? q - n : q - n + 91;
}

int tp_check(void *root, struct bench_check *c);

#endif /* PMKIT_BENCH_TPCC_H */
