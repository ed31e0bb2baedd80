/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gc.c -- pmkit_pool_gc reclaims exactly the unreachable blocks: a
 * chain from the root (through an interior pointer, and a large block) and
 * a block referenced from a context's extension word survive; unreachable
 * blocks, including a cycle, are freed; a block referenced only by a pool
 * offset survives only with PMKIT_GC_OFFSETS. gc refuses, freeing nothing,
 * a pool that pmkit_pool_check rejects.
 */
#include <string.h>

#include "pmkit/abi.h"
#include "testutil.h"

struct node {
  struct node *next;
  uint64_t off;
  char pad[48];
};

static const char *path;
static pmkit_pool *p;
static struct node *root, *a, *b, *big, *x, *y, *byoff, *viaext;

/* Reachable blocks (interior pointer, large block, a context's extension
 * word) survive; unreachable ones, a cycle included, go; a block referenced
 * only by an offset survives only with PMKIT_GC_OFFSETS. */
static void reclaims_unreachable(void) {
  path = test_pool_path("gc");
  CHECK_OK(pmkit_pool_create(path, 8 << 20, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *root, (void **)&root));
  CHECK_OK(pmkit_zalloc(p, sizeof *a, (void **)&a));
  CHECK_OK(pmkit_zalloc(p, sizeof *b, (void **)&b));
  CHECK_OK(pmkit_zalloc(p, 200000, (void **)&big));
  CHECK_OK(pmkit_zalloc(p, sizeof *x, (void **)&x));
  CHECK_OK(pmkit_zalloc(p, sizeof *y, (void **)&y));
  CHECK_OK(pmkit_zalloc(p, sizeof *byoff, (void **)&byoff));
  CHECK_OK(pmkit_zalloc(p, sizeof *viaext, (void **)&viaext));
  root->next = a;
  a->next = (struct node *)((char *)b + 24); /* interior pointer */
  b->next = big;
  ((struct node **)big)[1000] = NULL;
  x->next = y; /* an unreachable cycle */
  y->next = x;
  a->off = pmkit_off(p, byoff);
  pmkit_ctx *c;
  CHECK_OK(pmkit_ctx_get(p, &c));
  pmkit_ctx_ext(c)[PMKIT_EXT_USER] = pmkit_off(p, viaext);
  pmkit_persist(pmkit_ctx_ext(c), 64);
  pmkit_fence();

  pmkit_gc_stats st;
  CHECK_OK(pmkit_pool_gc(p, PMKIT_GC_OFFSETS, &st));
  CHECK(st.blocks_freed == 2 && st.blocks_live == 6);
  CHECK(pmkit_usable_size(p, x) == 0 && pmkit_usable_size(p, y) == 0);
  CHECK(pmkit_usable_size(p, byoff) > 0);
  CHECK_OK(pmkit_pool_gc(p, 0, &st));
  CHECK(st.blocks_freed == 1 && st.blocks_live == 5);
  CHECK(pmkit_usable_size(p, byoff) == 0);
  CHECK(pmkit_usable_size(p, a) && pmkit_usable_size(p, b) &&
        pmkit_usable_size(p, big) && pmkit_usable_size(p, viaext));
  CHECK_OK(pmkit_pool_check(p));
}

/* gc refuses a pool that check rejects, and frees nothing: a root offset
 * that is not a block's start (on which gc would have found nothing
 * reachable and freed every block), a zeroed root offset, a zeroed run
 * generation. pmkit_root refuses the bad offsets too. The state page:
 * run_gen, root_off, root_size, root_check at PMK_STATE_OFF (4096). */
static void refuses_corrupt_pool(void) {
  pmkit_gc_stats st;
  uint64_t *state = (uint64_t *)((char *)pmkit_pool_base(p) + 4096);
  uint64_t saved[4] = {state[0], state[1], state[2], state[3]};
  void *r2;
  state[1] = saved[1] + 8;
  CHECK(pmkit_pool_gc(p, 0, &st) == PMKIT_E_CORRUPT);
  CHECK(strstr(pmkit_errormsg(), "do not match their check word") &&
        strstr(pmkit_errormsg(), "gc freed nothing"));
  CHECK(pmkit_root(p, sizeof *root, &r2) == PMKIT_E_CORRUPT);
  state[1] = 0; /* no root: every block would be unreachable */
  CHECK(pmkit_pool_gc(p, 0, &st) == PMKIT_E_CORRUPT);
  CHECK(strstr(pmkit_errormsg(), "check word"));
  CHECK(pmkit_root(p, sizeof *root, &r2) == PMKIT_E_CORRUPT);
  state[1] = saved[1];
  state[3] = saved[3];
  state[0] = 0;
  CHECK(pmkit_pool_gc(p, 0, &st) == PMKIT_E_CORRUPT);
  state[0] = saved[0];
  CHECK(pmkit_usable_size(p, a) && pmkit_usable_size(p, b) &&
        pmkit_usable_size(p, big) && pmkit_usable_size(p, viaext));
  CHECK_OK(pmkit_root(p, sizeof *root, &r2));
  CHECK(r2 == root);
  CHECK_OK(pmkit_pool_gc(p, 0, &st));
  CHECK(st.blocks_freed == 0 && st.blocks_live == 5);
}

/* The allocator keeps working after the rebuild. */
static void allocator_after_gc(void) {
  void *n;
  CHECK_OK(pmkit_alloc(p, 64, &n));
  CHECK_OK(pmkit_free(p, n));
  CHECK_OK(pmkit_pool_close(p));
}

int main(void) {
  TEST_CASE(reclaims_unreachable);
  TEST_CASE(refuses_corrupt_pool);
  TEST_CASE(allocator_after_gc);
  unlink(path);
  return test_summary();
}
