/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crash_points_pair.c -- the program of tests/cli/test_crashpoints.py: a
 * two-word record updated in place by two plain stores, with no flush, no
 * fence and no failure-atomic section, so a crash between the stores leaves
 * a torn record. No fence crash point falls between them (there is no
 * fence); a store crash point does (PMKIT_CRASH_POINTS=stores).
 *   crash_points_pair run POOL N   create POOL, then N updates (v = 1..N)
 *   crash_points_pair check POOL   exit 0 if the record is whole, else 1
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmkit/pmkit.h"

struct record {
  volatile uint64_t a, b; /* whole when a == b; volatile: every update is
                             two stores, whatever the optimiser */
};

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, pmkit_errormsg());
  return 2;
}

int main(int argc, char **argv) {
  pmkit_pool_opts opts = {.layout = "crash-points-pair"};
  pmkit_pool *pool;
  struct record *r;
  if (argc == 4 && !strcmp(argv[1], "run")) {
    if (pmkit_pool_create(argv[2], PMKIT_POOL_MIN_SIZE, &opts, &pool))
      return fail("create");
    if (pmkit_root(pool, sizeof *r, (void **)&r))
      return fail("root");
    uint64_t n = strtoull(argv[3], NULL, 10);
    for (uint64_t v = 1; v <= n; v++) {
      r->a = v; /* the bug: nothing makes the pair one update */
      r->b = v;
    }
    return pmkit_pool_close(pool) ? 2 : 0;
  }
  if (argc == 3 && !strcmp(argv[1], "check")) {
    if (pmkit_pool_open(argv[2], &opts, &pool))
      return fail("open");
    if (pmkit_root(pool, sizeof *r, (void **)&r))
      return fail("root");
    int torn = r->a != r->b;
    printf("%s: a=%llu b=%llu\n", torn ? "INCONSISTENT" : "consistent",
           (unsigned long long)r->a, (unsigned long long)r->b);
    pmkit_pool_close(pool);
    return torn;
  }
  fprintf(stderr, "usage: %s run POOL N | check POOL\n", argv[0]);
  return 2;
}
