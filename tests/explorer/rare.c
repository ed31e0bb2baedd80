/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rare.c -- must-fail programs for the explorer's sampler: in each, the
 * bug shows in at most 1 of 64 crash images of the one crash point where it
 * can show, among more images than a point is given (so the point is
 * sampled, never enumerated). The sampler must still find each of them with
 * almost every seed (tests/cli/test_litmus.py: at least 19 of seeds 1-20).
 *
 *   rare init POOL           create POOL with a zeroed root (untraced run)
 *   rare run SHAPE POOL      run SHAPE on POOL (traced)
 *   rare check SHAPE POOL    exit 1 if the image shows SHAPE's bug, else 0
 *
 * Compiled with -DPMKIT_CHECK_LIB: the same check for --check-lib
 * ($PMKIT_RARE_SHAPE names the shape).
 *
 * Shapes (every store unflushed unless said otherwise; words on lines of
 * their own):
 *   group24   24 stores; the bug: the last one persisted while all five of
 *             stores 3, 7, 11, 15 and 19 were lost (1 image in 64).
 *   chain     a counter stored 7 times (1..7), then d, e, f; the bug: the
 *             counter shows 2 with d persisted and e, f lost (1 in 64).
 *   wide300   300 stores; the bug: the last persisted while stores 0, 50,
 *             100, 150 and 200 were lost (1 in 64 at that point).
 *   mixed24   24 stores; the bug needs stores 2, 9 and 16 lost and 5, 12
 *             and 20 persisted: no single loss, window or keep-one shows
 *             it, only a mix (1 in 64).
 *   mixed300  the same mix among 300 stores (1 in 64).
 *   late      mixed24's stores, written back and fenced at once, then 150
 *             other stores, each fenced (a crash point): the bug shows only
 *             at the crash point before the first fence, one of 150.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmkit/pmkit.h"

#define LINES 320
#define W(i) (8 * (i)) /* word index of line i's first word */

struct root {
  uint64_t raw[8 * LINES + 8];
};

static uint64_t *area_of(void *root) {
  return (uint64_t *)(((uintptr_t)root + 63) & ~(uintptr_t)63);
}

static void run_group24(uint64_t *w) {
  for (unsigned i = 0; i < 24; i++)
    w[W(i)] = i + 1;
}
static int bad_group24(const uint64_t *w) {
  return w[W(23)] && !w[W(3)] && !w[W(7)] && !w[W(11)] && !w[W(15)] &&
         !w[W(19)];
}

static void run_chain(uint64_t *w) {
  volatile uint64_t *c = &w[W(0)];
  for (uint64_t v = 1; v <= 7; v++)
    *c = v;
  w[W(1)] = 1;
  w[W(2)] = 1;
  w[W(3)] = 1;
}
static int bad_chain(const uint64_t *w) {
  return w[W(0)] == 2 && w[W(1)] && !w[W(2)] && !w[W(3)];
}

static void run_wide300(uint64_t *w) {
  for (unsigned i = 0; i < 300; i++)
    w[W(i)] = i + 1;
}
static int bad_wide300(const uint64_t *w) {
  return w[W(299)] && !w[W(0)] && !w[W(50)] && !w[W(100)] && !w[W(150)] &&
         !w[W(200)];
}

static int bad_mixed(const uint64_t *w) {
  return !w[W(2)] && !w[W(9)] && !w[W(16)] && w[W(5)] && w[W(12)] && w[W(20)];
}

static void run_late(uint64_t *w) {
  run_group24(w);
  for (unsigned i = 0; i < 24; i++)
    _mm_clwb(&w[W(i)]);
  _mm_sfence(); /* the one crash point that shows the mix is before this */
  for (unsigned i = 0; i < 150; i++) { /* lines 100..249, each fenced */
    w[W(100 + i)] = i + 1;
    _mm_clwb(&w[W(100 + i)]);
    _mm_sfence();
  }
}

struct shape {
  const char *name;
  void (*run)(uint64_t *w);
  int (*bad)(const uint64_t *w);
};

static const struct shape shapes[] = {
    {"group24", run_group24, bad_group24}, {"chain", run_chain, bad_chain},
    {"wide300", run_wide300, bad_wide300}, {"mixed24", run_group24, bad_mixed},
    {"mixed300", run_wide300, bad_mixed},  {"late", run_late, bad_mixed},
};

static const struct shape *find(const char *name) {
  for (size_t i = 0; name && i < sizeof shapes / sizeof shapes[0]; i++)
    if (!strcmp(shapes[i].name, name))
      return &shapes[i];
  return NULL;
}

static int check(const struct shape *s, pmkit_pool *pool) {
  void *root;
  if (pmkit_root(pool, sizeof(struct root), &root))
    return 2;
  int bad = s->bad(area_of(root));
  if (bad)
    fprintf(stderr, "rare %s: the image shows the bug\n", s->name);
  return bad;
}

#ifdef PMKIT_CHECK_LIB

__attribute__((visibility("default"))) int pmkit_check(void *pool_base);

int pmkit_check(void *pool_base) {
  const struct shape *s = find(getenv("PMKIT_RARE_SHAPE"));
  pmkit_pool *pool;
  if (!s || pmkit_pool_attach(pool_base, &pool))
    return 2;
  int r = check(s, pool);
  pmkit_pool_close(pool);
  return r;
}

#else

int main(int argc, char **argv) {
  const struct shape *s = argc == 4 ? find(argv[2]) : NULL;
  pmkit_pool_opts o = {.layout = "rare"};
  pmkit_pool *pool;
  void *root;
  if (argc == 3 && !strcmp(argv[1], "init")) {
    if (pmkit_pool_create(argv[2], 4u << 20, &o, &pool) ||
        pmkit_root(pool, sizeof(struct root), &root))
      return 2;
    pmkit_pool_close(pool);
    return 0;
  }
  if (s && !strcmp(argv[1], "run")) {
    if (pmkit_pool_open(argv[3], &o, &pool) ||
        pmkit_root(pool, sizeof(struct root), &root))
      return 2;
    s->run(area_of(root));
    pmkit_pool_close(pool);
    return 0;
  }
  if (s && !strcmp(argv[1], "check")) {
    if (pmkit_pool_open(argv[3], &o, &pool))
      return 2;
    int r = check(s, pool);
    pmkit_pool_close(pool);
    return r;
  }
  fprintf(stderr, "usage: rare init POOL | run|check SHAPE POOL\n");
  return 2;
}

#endif
