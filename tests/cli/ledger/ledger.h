/* SPDX-License-Identifier: Apache-2.0 */
/* ledger.h -- a small multi-file program for the build-shape tests
 * (tests/cli/test_build_shapes.py): a ledger of (key, value) entries in a
 * pool, kept by a static library (libledger.a: ledger.c, alloc.c) and driven
 * by main.c. One source builds in robust, clobber and ssapp mode. */
#ifndef LEDGER_H
#define LEDGER_H
#include <pmkit/pmkit.h>

#define LEDGER_CAP 64

struct ledger {
  long count;
  long sum; /* of vals[0..count): only a failure-atomic put keeps it exact */
  long keys[LEDGER_CAP];
  long vals[LEDGER_CAP];
};

/* `size` zeroed bytes of `pool`, aligned to 64 bytes; NULL when full. */
void *ledger_alloc(pmkit_pool *pool, unsigned long size);
/* Append (key, val): entries first, then the count that publishes them. */
PMKIT_FASE void ledger_put(struct ledger *l, long key, long val);
/* 0 if entry i is (i, 2i+1) for every i < count and, with `atomic`, sum is
 * their sum. */
int ledger_check(const struct ledger *l, int atomic);
#endif
