/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heapwalk.h -- the workload and checker shared by the allocator's crash
 * and concurrency tests. The workload keeps a table of published blocks in
 * the root object; each block carries a header naming its own address, size
 * and a sequence number, and is filled with a byte derived from them. A
 * block is initialised and persisted before its pointer is published, and
 * unpublished durably before it is freed, as the allocator's contract asks.
 * The checker validates pool metadata (pmkit_pool_check), every published
 * block's header and contents, that no two published blocks overlap, and
 * that blocks allocated afterwards never overlap a published one.
 */
#ifndef PMKIT_HEAPWALK_H
#define PMKIT_HEAPWALK_H

#include "testutil.h"

#define HW_SLOTS 512
#define HW_MAGIC 0x6877616c6b6d6167ull

struct hw_root {
  uint64_t ops;
  uint64_t slot[HW_SLOTS];
};

struct hw_block {
  uint64_t magic; /* HW_MAGIC ^ own address */
  uint64_t size;
  uint64_t seq;
};

static inline uint8_t hw_fill(const struct hw_block *b) {
  return (uint8_t)(b->seq * 31 + b->size);
}

static inline size_t hw_size(uint64_t *rng) {
  uint64_t r = test_rand(rng);
  if (r % 64 == 0)
    return 9000 + (r >> 8) % 150000; /* large: whole chunks */
  static const size_t sz[] = {24, 40, 64, 100, 128, 200, 256, 500, 1000, 4096};
  return sz[(r >> 8) % 10] + (r >> 20) % 16;
}

/* One operation on slot range [lo, hi): free a published block or publish a
 * new one. Returns 0 or a pmkit error (heap full is not an error here). */
static inline int hw_step(pmkit_pool *p, struct hw_root *rt, uint64_t *rng,
                          unsigned lo, unsigned hi, uint64_t seq) {
  unsigned i = lo + (unsigned)(test_rand(rng) % (hi - lo));
  uint64_t *slot = &rt->slot[i];
  if (*slot) {
    void *old = (void *)*slot;
#ifdef HW_BUG_FREE_FIRST /* the must-fail case: free, then unpublish */
    int r = pmkit_free(p, old);
    pmkit_crash_point();
    __atomic_store_n(slot, 0, __ATOMIC_RELEASE);
    pmkit_persist(slot, 8);
    return r;
#endif
    __atomic_store_n(slot, 0, __ATOMIC_RELEASE);
    pmkit_persist(slot, 8); /* unpublish durably, then free */
    return pmkit_free(p, old);
  }
  size_t size = hw_size(rng);
  struct hw_block *b;
  int r = pmkit_alloc(p, size, (void **)&b);
  if (r == PMKIT_E_NOMEM)
    return 0;
  if (r)
    return r;
  b->magic = HW_MAGIC ^ (uint64_t)(uintptr_t)b;
  b->size = size;
  b->seq = seq;
  memset(b + 1, hw_fill(b), size - sizeof *b);
  pmkit_persist(b, size); /* contents and allocation durable... */
  __atomic_store_n(slot, (uint64_t)(uintptr_t)b, __ATOMIC_RELEASE);
  pmkit_persist(slot, 8); /* ...before the pointer is */
  return 0;
}

struct hw_range {
  uintptr_t a, b;
};

static int hw_cmp(const void *x, const void *y) {
  const struct hw_range *p = x, *q = y;
  return p->a < q->a ? -1 : p->a > q->a;
}

/* Validate the published blocks (allocated, header, contents, no overlap)
 * and that new allocations never hand one out again, without the metadata
 * check; returns the number of published blocks, or -1 with a message on
 * stderr. */
static inline int hw_verify(pmkit_pool *p, struct hw_root *rt) {
  static struct hw_range r[HW_SLOTS + 1];
  int n = 0;
  for (unsigned i = 0; i < HW_SLOTS; i++) {
    uint64_t v = rt->slot[i];
    if (!v)
      continue;
    struct hw_block *b = (struct hw_block *)v;
    size_t us = pmkit_usable_size(p, b);
    if (us == 0) {
      fprintf(stderr, "heapwalk: slot %u: %p is published but not allocated\n",
              i, (void *)b);
      return -1;
    }
    if (b->magic != (HW_MAGIC ^ v) || b->size > us) {
      fprintf(stderr, "heapwalk: slot %u: %p has a bad header\n", i, (void *)b);
      return -1;
    }
    const uint8_t *c = (const uint8_t *)(b + 1);
    uint8_t f = hw_fill(b);
    for (size_t k = 0; k < b->size - sizeof *b; k++)
      if (c[k] != f) {
        fprintf(stderr, "heapwalk: slot %u: %p byte %zu is %#x not %#x\n", i,
                (void *)b, k, c[k], f);
        return -1;
      }
    r[n].a = (uintptr_t)b;
    r[n].b = (uintptr_t)b + us;
    n++;
  }
  qsort(r, (size_t)n, sizeof r[0], hw_cmp);
  for (int k = 1; k < n; k++)
    if (r[k].a < r[k - 1].b) {
      fprintf(stderr, "heapwalk: blocks %#lx and %#lx overlap\n",
              (unsigned long)r[k - 1].a, (unsigned long)r[k].a);
      return -1;
    }
  /* New allocations must not hand out any published block again. */
  void *fresh[256];
  int nf = 0;
  for (int k = 0; k < 256; k++) {
    size_t size = k < 200 ? 16u << (k % 9) : 20000u + (size_t)k * 1000u;
    if (pmkit_alloc(p, size, &fresh[nf]) != 0)
      continue;
    uintptr_t a = (uintptr_t)fresh[nf], e = a + size;
    nf++;
    for (int j = 0; j < n; j++)
      if (a < r[j].b && r[j].a < e) {
        fprintf(stderr, "heapwalk: new block %#lx overlaps published %#lx\n",
                (unsigned long)a, (unsigned long)r[j].a);
        return -1;
      }
  }
  for (int k = 0; k < nf; k++)
    if (pmkit_free(p, fresh[k])) {
      fprintf(stderr, "heapwalk: free of new block: %s\n", pmkit_errormsg());
      return -1;
    }
  return n;
}

/* Validate everything: the metadata (pmkit_pool_check), then hw_verify. */
static inline int hw_check(pmkit_pool *p, struct hw_root *rt) {
  if (pmkit_pool_check(p)) {
    fprintf(stderr, "heapwalk: metadata: %s\n", pmkit_errormsg());
    return -1;
  }
  return hw_verify(p, rt);
}

#endif
