/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_alloc_basic.c -- single-thread allocator behaviour: every size class
 * and large runs give distinct, aligned, writable blocks of at least the
 * requested size; frees are reused; bad and double frees are refused with
 * PMKIT_E_INVAL; a full heap gives PMKIT_E_NOMEM; allocations and the root
 * survive close and reopen; pmkit_pool_stat counts what is live.
 */
#include "testutil.h"

enum { N = 600 };
static const char *path;
static pmkit_pool *p;
static void *blk[N];
static size_t sz[N];
static unsigned char *z;
static void **root;
static int filled; /* blocks of 4000 bytes that filled the heap */

/* Every size class and large runs: distinct, aligned, writable. */
static void sizes_and_runs(void) {
  path = test_pool_path("alloc-basic");
  CHECK_OK(pmkit_pool_create(path, 32 << 20, NULL, &p));
  for (int i = 0; i < N; i++) {
    sz[i] = i < 500 ? (size_t)(1 + i * 17 % 8192) : (size_t)(9000 + i * 301);
    CHECK_OK(pmkit_alloc(p, sz[i], &blk[i]));
    CHECK(pmkit_in_pool(blk[i]));
    CHECK(((uintptr_t)blk[i] & 15) == 0);
    CHECK(pmkit_usable_size(p, blk[i]) >= sz[i]);
    memset(blk[i], i & 0xff, sz[i]);
  }
  for (int i = 0; i < N; i++) { /* nothing overwrote anything */
    const unsigned char *c = blk[i];
    for (size_t k = 0; k < sz[i]; k++)
      CHECK(c[k] == (i & 0xff));
  }
  pmkit_pool_info info;
  CHECK_OK(pmkit_pool_stat(p, &info));
  CHECK(info.blocks_used == N);
  CHECK(info.chunks_large > 0 && info.chunks_small > 0);
}

/* Bad and double frees are refused; a freed block comes back. */
static void bad_frees(void) {
  CHECK_RC(pmkit_free(p, (char *)blk[3] + 1), PMKIT_E_INVAL);
  CHECK_RC(pmkit_free(p, &p), PMKIT_E_INVAL);
  CHECK_OK(pmkit_free(p, blk[3]));
  CHECK_RC(pmkit_free(p, blk[3]), PMKIT_E_INVAL);
  CHECK(strstr(pmkit_errormsg(), "double free"));
  CHECK(pmkit_usable_size(p, blk[3]) == 0);
  CHECK_OK(pmkit_free(p, NULL));
  void *again;
  CHECK_OK(pmkit_alloc(p, sz[3], &again)); /* the freed block comes back */
  CHECK(again == blk[3]);
  CHECK_OK(pmkit_free(p, blk[N - 1]));
  CHECK_RC(pmkit_free(p, blk[N - 1]), PMKIT_E_INVAL);
  blk[N - 1] = NULL;
}

/* zalloc zeroes. */
static void zalloc_zeroes(void) {
  CHECK_OK(pmkit_zalloc(p, 300, (void **)&z));
  for (int k = 0; k < 300; k++)
    CHECK(z[k] == 0);
}

/* Root and blocks survive a reopen. */
static void survives_reopen(void) {
  void *again;
  CHECK_OK(pmkit_root(p, sizeof(void *) * N, (void **)&root));
  memcpy(root, blk, sizeof blk);
  pmkit_persist(root, sizeof blk);
  CHECK_OK(pmkit_pool_close(p));
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_root(p, 8, (void **)&root));
  CHECK_RC(pmkit_root(p, sizeof(void *) * N + 1, &again), PMKIT_E_INVAL);
  for (int i = 0; i < N - 1; i++) {
    CHECK(root[i] == blk[i]);
    CHECK(pmkit_usable_size(p, root[i]) >= sz[i]);
    CHECK(((unsigned char *)root[i])[sz[i] - 1] == (i & 0xff));
  }
  CHECK_OK(pmkit_pool_check(p));
}

/* Fill the heap: NOMEM, not a crash; then everything frees. */
static void fill_heap(void) {
  int n = 0;
  static void *more[100000];
  void *again;
  int r;
  while ((r = pmkit_alloc(p, 4000, &more[n])) == 0)
    n++;
  filled = n;
  CHECK_RC(r, PMKIT_E_NOMEM);
  CHECK_RC(pmkit_alloc(p, 1 << 30, &again), PMKIT_E_NOMEM);
  CHECK(n > 100);
  for (int i = 0; i < n; i++)
    CHECK_OK(pmkit_free(p, more[i]));
  for (int i = 0; i < N - 1; i++)
    CHECK_OK(pmkit_free(p, root[i]));
  CHECK_OK(pmkit_free(p, z));
  pmkit_pool_info info;
  CHECK_OK(pmkit_pool_stat(p, &info));
  CHECK(info.blocks_used == 1); /* the root */
  CHECK_OK(pmkit_pool_close(p));
}

/* Empty chunks go back to the heap at the next open. */
static void empty_chunks_return(void) {
  pmkit_pool_info info;
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_pool_stat(p, &info));
  CHECK(info.chunks_small == 1 && info.chunks_large == 0);
  CHECK_OK(pmkit_pool_close(p));
}

int main(void) {
  TEST_CASE(sizes_and_runs);
  TEST_CASE(bad_frees);
  TEST_CASE(zalloc_zeroes);
  TEST_CASE(survives_reopen);
  TEST_CASE(fill_heap);
  TEST_CASE(empty_chunks_return);
  unlink(path);
  printf("alloc_basic: %d blocks filled the heap\n", filled);
  return test_summary();
}
