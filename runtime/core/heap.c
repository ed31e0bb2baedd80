/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap.c -- the crash-consistent, thread-scalable allocator of a pool.
 *
 * Persistent truth is small and always consistent: a chunk table entry per
 * 64 KiB chunk (free, small class, head or continuation of a large run) and,
 * in each small chunk, a bitmap with one bit per block. Every change is one
 * aligned 8-byte (or 4-byte table) store or locked RMW, so a crash at any
 * instruction leaves valid metadata; the worst a crash can do is leak a block
 * that was allocated but not yet published, which pmkit_pool_gc reclaims.
 * A new small chunk's header is persisted and fenced before its table entry
 * names its class, so a chunk is never seen with a stale bitmap.
 *
 * Speed comes from volatile state beside it: each thread owns one current
 * chunk per size class and is the only one to set bits in it. It reserves
 * all free blocks of one bitmap word at once (one locked OR and one
 * cache-line write-back, no fence) and then hands them out from a volatile
 * mask, so most allocations touch no persistent memory at all. The
 * reservation is durable at the caller's next fence, which a correct program
 * issues before publishing a block. A crash leaks the reserved blocks not
 * yet handed out (at most 63 per class and thread); pmkit_pool_gc reclaims
 * them. Frees from any thread clear a bit with a locked AND and no
 * write-back: losing a free in a crash only leaks a block its program had
 * already unpublished. A full chunk is detached from its owner and returns
 * to a per-class list of partial chunks when a block in it is freed.
 *
 * Failure-atomic runtimes journal allocations in the thread's context slot
 * (pmkit_fase_begin): each block is recorded before it is marked allocated,
 * frees are deferred to commit, and a replayed section gets the same
 * blocks back in the same order (heap_journal.c). This file: size
 * classes, chunks, thread caches, reserve and commit; entry points
 * pmkit_alloc, pmkit_free. Open and check are in heap_open.c, gc in
 * heap_gc.c, repair in heap_repair.c; heapint.h is what they share.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapint.h"

const uint32_t pmk_class_size[PMK_NCLASS] = {
    16,   32,   48,   64,   80,   96,   112,  128,  160,  192,  224,
    256,  320,  384,  448,  512,  640,  768,  896,  1024, 1280, 1536,
    1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192};

static uint8_t cls_by16[65];  /* (size + 15) / 16 -> class, size <= 1024 */
static uint8_t cls_by128[65]; /* (size + 127) / 128 -> class, size <= 8192 */
pthread_once_t pmk_heap_cls_once = PTHREAD_ONCE_INIT;

void pmk_heap_cls_init(void) {
  unsigned c = 0;
  for (unsigned i = 0; i <= 64; i++) {
    while (pmk_class_size[c] < i * 16)
      c++;
    cls_by16[i] = (uint8_t)c;
  }
  c = 0;
  for (unsigned i = 0; i <= 64; i++) {
    while (pmk_class_size[c] < i * 128)
      c++;
    cls_by128[i] = (uint8_t)c;
  }
}

static inline unsigned size_class(size_t size) {
  if (size <= 1024)
    return cls_by16[(size + 15) >> 4];
  return cls_by128[(size + 127) >> 7];
}

void pmk_heap_table_store(pmkit_pool *p, uint32_t id, uint32_t v) {
  pmk_crash_point();
  __atomic_store_n(&p->table[id], v, __ATOMIC_RELEASE);
  pmk_flush_line(&p->table[id]);
}

/* ---- block lookup ---------------------------------------------------------
 */

/* Find the block slot whose start is exactly `a`. Returns 0 or -1. */
int pmk_heap_blk_at(const pmkit_pool *p, uintptr_t a, struct blk *b) {
  if (a < p->heap || a >= chunk_addr(p, p->nchunks))
    return -1;
  uint32_t id = (uint32_t)((a - p->heap) >> PMK_CHUNK_SHIFT);
  uint32_t e = __atomic_load_n(&p->table[id], __ATOMIC_ACQUIRE);
  uintptr_t ca = chunk_addr(p, id);
  if (e & PMK_T_HEAD) {
    if (a != ca + PMK_LARGE_HDR)
      return -1;
    b->chunk = id;
    b->idx = e & PMK_T_LEN_MASK;
    b->large = 1;
    b->addr = a;
    b->size = ((size_t)b->idx << PMK_CHUNK_SHIFT) - PMK_LARGE_HDR;
    return 0;
  }
  if (e == PMK_T_FREE || e > PMK_NCLASS)
    return -1;
  unsigned c = e - 1;
  uint32_t bs = pmk_class_size[c];
  if (a < ca + PMK_CHUNK_HDR)
    return -1;
  uint32_t rel = (uint32_t)(a - ca - PMK_CHUNK_HDR);
  uint32_t idx = rel / bs;
  if (rel != idx * bs || idx >= nblocks_of(c))
    return -1;
  b->chunk = id;
  b->idx = idx;
  b->large = 0;
  b->addr = a;
  b->size = bs;
  return 0;
}

int pmk_heap_blk_live(const pmkit_pool *p, const struct blk *b) {
  if (b->large)
    return 1; /* a head entry is the allocation */
  uint64_t w = __atomic_load_n(&chunk_hdr(p, b->chunk)->bitmap[b->idx >> 6],
                               __ATOMIC_ACQUIRE);
  return (w >> (b->idx & 63)) & 1;
}

/* ---- volatile lists --------------------------------------------------------
 */

void pmk_heap_list_push(struct pmk_list *l, uint32_t id) {
  pthread_mutex_lock(&l->lock);
  if (l->n == l->cap) {
    uint32_t cap = l->cap ? l->cap * 2 : 16;
    uint32_t *ids = realloc(l->ids, cap * sizeof *ids);
    if (!ids) { /* out of DRAM: the chunk stays detached until reopen */
      pthread_mutex_unlock(&l->lock);
      return;
    }
    l->ids = ids;
    l->cap = cap;
  }
  l->ids[l->n++] = id;
  pthread_mutex_unlock(&l->lock);
}

static uint32_t list_pop(struct pmk_list *l) {
  uint32_t id = PMK_NONE;
  pthread_mutex_lock(&l->lock);
  if (l->n)
    id = l->ids[--l->n];
  pthread_mutex_unlock(&l->lock);
  return id;
}

static int chunk_has_free(const pmkit_pool *p, uint32_t id, unsigned c) {
  const struct pmk_chunk *ch = chunk_hdr(p, id);
  uint32_t nw = (nblocks_of(c) + 63) >> 6;
  for (uint32_t w = 0; w < nw; w++)
    if (~__atomic_load_n(&ch->bitmap[w], __ATOMIC_SEQ_CST))
      return 1;
  return 0;
}

/* A detached chunk with a free block goes (once) to its class list. The
 * seq_cst state store and the freer's seq_cst RMW make sure that either the
 * detacher sees the freed bit or the freer sees DETACHED. */
static void maybe_list(pmkit_pool *p, uint32_t id, unsigned c) {
  uint8_t s = PMK_CS_DETACHED;
  if (atomic_compare_exchange_strong(&p->cstate[id], &s, PMK_CS_LISTED))
    pmk_heap_list_push(&p->partial[c], id);
}

static void detach(pmkit_pool *p, uint32_t id, unsigned c) {
  atomic_store(&p->cstate[id], PMK_CS_DETACHED);
  if (chunk_has_free(p, id, c))
    maybe_list(p, id, c);
}

/* ---- chunks
 * ------------------------------------------------------------------ */

static void chunk_init_small(pmkit_pool *p, uint32_t id, unsigned c) {
  struct pmk_chunk *ch = chunk_hdr(p, id);
  uint32_t nb = nblocks_of(c);
  pmk_crash_point();
  ch->cls = c + 1;
  ch->nblocks = nb;
  memset(ch->bitmap, 0, sizeof ch->bitmap);
  /* Bits past the last block read as allocated, so scans skip them. They are
   * fenced a line at a time: none of this matters before the table names the
   * class, but left pending together, the tail words of a chunk of 32-byte
   * blocks made 2^90 crash images at the fence below for the explorer to
   * sample, in every program whose first allocation was inside an operation
   * it checks; fenced by line, 9 at each of a few points. */
  if (nb % 64)
    ch->bitmap[nb / 64] = ~0ull << (nb % 64);
  for (uint32_t w = (nb + 63) / 64; w < PMK_BITMAP_WORDS; w++) {
    ch->bitmap[w] = ~0ull;
    if (w + 1 == PMK_BITMAP_WORDS || !((uintptr_t)&ch->bitmap[w + 1] & 63)) {
      pmk_flush_line(&ch->bitmap[w]);
      pmk_fence();
    }
  }
  pmkit_flush(ch, sizeof *ch);
  pmk_fence(); /* header durable before the table names the class */
  pmk_heap_table_store(p, id, c + 1);
}

/* Take free chunks [first, first+n) out of the volatile free map. */
static uint32_t freemap_take(pmkit_pool *p, uint32_t n) {
  pthread_mutex_lock(&p->chunk_lock);
  uint32_t run = 0, found = PMK_NONE;
  for (uint32_t k = 0; k < p->nchunks; k++) {
    uint32_t id = (p->rover + k) % p->nchunks;
    if (n > 1 && id == 0)
      run = 0; /* runs do not wrap around */
    if (p->freemap[id >> 6] >> (id & 63) & 1) {
      if (++run == n) {
        found = id + 1 - n;
        break;
      }
    } else {
      run = 0;
    }
  }
  if (found != PMK_NONE) {
    for (uint32_t i = found; i < found + n; i++)
      p->freemap[i >> 6] &= ~(1ull << (i & 63));
    p->rover = (found + n) % p->nchunks;
  }
  pthread_mutex_unlock(&p->chunk_lock);
  return found;
}

static void freemap_put(pmkit_pool *p, uint32_t first, uint32_t n) {
  pthread_mutex_lock(&p->chunk_lock);
  for (uint32_t i = first; i < first + n; i++)
    p->freemap[i >> 6] |= 1ull << (i & 63);
  pthread_mutex_unlock(&p->chunk_lock);
}

static uint32_t take_chunk(pmkit_pool *p, unsigned c) {
  uint32_t id = list_pop(&p->partial[c]);
  if (id != PMK_NONE) {
    atomic_store(&p->cstate[id], PMK_CS_OWNED);
    return id;
  }
  id = freemap_take(p, 1);
  if (id == PMK_NONE)
    return id;
  chunk_init_small(p, id, c);
  atomic_store(&p->cstate[id], PMK_CS_OWNED);
  return id;
}

/* A large run: the head entry (the commit point) first, fenced before
 * the continuations and the chunk header, so that a continuation without a
 * head, or a free entry whose chunk header names a run, is corruption and
 * never a crash's leftover. The continuations could persist in any order (a
 * crash leaves a run with free entries inside it, which open completes), but
 * each is fenced: left unordered, the 2 entries of each 8-byte word of the
 * table made 3^8 crash images of a 1 MiB allocation for the explorer to
 * check, in every program that allocates one inside a FASE; fenced, 2 per
 * crash point. A fence per 64 KiB chunk costs nothing next to zeroing it. */
void pmk_heap_large_commit(pmkit_pool *p, uint32_t first, uint32_t n) {
  pmk_heap_table_store(p, first, PMK_T_HEAD | n);
  pmk_fence();
  for (uint32_t i = 1; i < n; i++) {
    pmk_heap_table_store(p, first + i, PMK_T_CONT);
    pmk_fence();
  }
  struct pmk_chunk *ch = chunk_hdr(p, first);
  ch->cls = PMK_T_HEAD | n;
  ch->nblocks = 1;
  pmk_flush_line(ch);
}

static uint32_t large_len(size_t size) {
  return (uint32_t)((size + PMK_LARGE_HDR + PMK_CHUNK - 1) >> PMK_CHUNK_SHIFT);
}

/* ---- thread caches
 * ----------------------------------------------------------- */

__thread struct pmk_tc *pmk_tcs[PMK_MAX_POOLS]
    __attribute__((tls_model("initial-exec")));
static pthread_key_t tc_key;
static pthread_once_t tc_key_once = PTHREAD_ONCE_INIT;

static void tc_thread_exit(void *unused) {
  (void)unused;
  for (unsigned i = 0; i < PMK_MAX_POOLS; i++) {
    struct pmk_tc *tc = pmk_tcs[i];
    if (!tc)
      continue;
    /* The pool may have been closed (and freed) since: ask the registry. */
    pmkit_pool *p = pmk_reg_lookup(i, tc->serial);
    if (p)
      pmk_heap_thread_exit(p, tc);
    free(tc);
    pmk_tcs[i] = NULL;
  }
}

static void tc_key_init(void) { pthread_key_create(&tc_key, tc_thread_exit); }

struct pmk_tc *pmk_tc_slow(pmkit_pool *p) {
  struct pmk_tc *tc = pmk_tcs[p->id];
  if (!tc) {
    tc = malloc(sizeof *tc);
    if (!tc)
      return NULL;
    pthread_once(&tc_key_once, tc_key_init);
    pthread_setspecific(tc_key, (void *)1);
    pmk_tcs[p->id] = tc;
  }
  memset(tc, 0, sizeof *tc);
  tc->serial = p->serial;
  tc->pool = p;
  for (unsigned c = 0; c < PMK_NCLASS; c++)
    tc->cls[c].chunk = PMK_NONE;
  return tc;
}

static void unreserve(pmkit_pool *p, struct pmk_tcls *t);

void pmk_heap_thread_exit(pmkit_pool *p, struct pmk_tc *tc) {
  for (unsigned c = 0; c < PMK_NCLASS; c++)
    if (tc->cls[c].chunk != PMK_NONE) {
      unreserve(p, &tc->cls[c]);
      detach(p, tc->cls[c].chunk, c);
      tc->cls[c].chunk = PMK_NONE;
    }
  if (tc->ctx) {
    pmkit_ctx_release(tc->ctx);
    tc->ctx = NULL;
  }
}

/* ---- reserve and commit
 * -------------------------------------------------------- */

/* Hand out a reserved block of class c, reserving the free blocks of the
 * next bitmap word with free bits when none is left. Only the owner sets
 * bits in a chunk, so the free bits it sees stay free until it sets them. */
static int small_pick(pmkit_pool *p, struct pmk_tc *tc, unsigned c,
                      struct blk *b) {
  struct pmk_tcls *t = &tc->cls[c];
  while (PMK_UNLIKELY(t->mask == 0)) {
    if (t->chunk != PMK_NONE) {
      struct pmk_chunk *ch = chunk_hdr(p, t->chunk);
      uint32_t nw = (nblocks_of(c) + 63) >> 6;
      for (uint32_t i = 0; i < nw; i++) {
        uint32_t w = t->word + i;
        if (w >= nw)
          w -= nw;
        uint64_t v = __atomic_load_n(&ch->bitmap[w], __ATOMIC_RELAXED);
        if (~v) {
          pmk_crash_point();
          uint64_t old =
              __atomic_fetch_or(&ch->bitmap[w], ~v, __ATOMIC_SEQ_CST);
          pmk_flush_line(&ch->bitmap[w]);
          t->word = w;
          t->mask = ~v & ~old;
          break;
        }
      }
      if (t->mask)
        break;
      detach(p, t->chunk, c);
      t->chunk = PMK_NONE;
    }
    uint32_t id = take_chunk(p, c);
    if (id == PMK_NONE)
      return pmk_err(PMKIT_E_NOMEM, "pool heap exhausted (%u-byte class)",
                     pmk_class_size[c]);
    t->chunk = id;
    t->word = 0;
  }
  uint32_t bit = (uint32_t)__builtin_ctzll(t->mask);
  t->mask &= t->mask - 1;
  b->chunk = t->chunk;
  b->idx = t->word * 64 + bit;
  b->large = 0;
  b->size = pmk_class_size[c];
  b->addr =
      chunk_addr(p, t->chunk) + PMK_CHUNK_HDR + (uintptr_t)b->idx * b->size;
  return 0;
}

/* Give back the calling thread's reserved, unused blocks of one class. */
static void unreserve(pmkit_pool *p, struct pmk_tcls *t) {
  if (!t->mask)
    return;
  uint64_t *w = &chunk_hdr(p, t->chunk)->bitmap[t->word];
  pmk_crash_point();
  __atomic_fetch_and(w, ~t->mask, __ATOMIC_SEQ_CST);
  pmk_flush_line(w);
  t->mask = 0;
}

void pmk_tc_unreserve(pmkit_pool *p) {
  struct pmk_tc *tc = pmk_tcs[p->id];
  if (!tc || tc->serial != p->serial)
    return;
  for (unsigned c = 0; c < PMK_NCLASS; c++)
    unreserve(p, &tc->cls[c]);
  pmk_fence();
}

int pmk_heap_reserve(pmkit_pool *p, struct pmk_tc *tc, size_t size,
                     struct blk *b) {
  if (size <= PMKIT_ALLOC_MAX_SMALL)
    return small_pick(p, tc, size_class(size ? size : 1), b);
  if (size > ((size_t)p->nchunks << PMK_CHUNK_SHIFT))
    return pmk_err(PMKIT_E_NOMEM, "allocation of %zu bytes exceeds the pool",
                   size);
  uint32_t n = large_len(size);
  uint32_t first = freemap_take(p, n);
  if (first == PMK_NONE)
    return pmk_err(PMKIT_E_NOMEM, "pool heap has no %u free chunks in a row",
                   n);
  b->chunk = first;
  b->idx = n;
  b->large = 1;
  b->addr = chunk_addr(p, first) + PMK_LARGE_HDR;
  b->size = ((size_t)n << PMK_CHUNK_SHIFT) - PMK_LARGE_HDR;
  return 0;
}

/* Make a reserved block allocated in PM. Small blocks already are: their
 * word was reserved by small_pick. */
void pmk_heap_commit(pmkit_pool *p, const struct blk *b) {
  if (b->large)
    pmk_heap_large_commit(p, b->chunk, b->idx);
}

/* Mark one small block allocated (journal replay after a crash). */
void pmk_heap_set_bit(pmkit_pool *p, const struct blk *b) {
  uint64_t *w = &chunk_hdr(p, b->chunk)->bitmap[b->idx >> 6];
  pmk_crash_point();
  __atomic_fetch_or(w, 1ull << (b->idx & 63), __ATOMIC_RELAXED);
  pmk_flush_line(w);
}

/* Release a block in PM; 1 if it was live, 0 if already free. `flush`
 * writes a small block's bitmap word back (a large run's table entries
 * always are); pmkit_free does not: a lost free only leaks. */
int pmk_heap_release(pmkit_pool *p, const struct blk *b, int flush) {
  if (b->large) {
    if (p->table[b->chunk] != (PMK_T_HEAD | b->idx))
      return 0;
    /* The reverse of large_commit, each step fenced: every chunk's
     * first word (a free chunk must not look like one that holds blocks, and
     * the program's data there could), the continuations, then the head (the
     * commit point). A crash before the head leaves the run allocated
     * (a leak), with free entries inside it. */
    for (uint32_t i = 0; i < b->idx; i++) {
      struct pmk_chunk *ch = chunk_hdr(p, b->chunk + i);
      pmk_crash_point();
      __atomic_store_n(&ch->cls, 0, __ATOMIC_RELAXED);
      pmk_flush_line(ch);
    }
    pmk_fence();
    for (uint32_t i = b->idx; i-- > 1;)
      pmk_heap_table_store(p, b->chunk + i, PMK_T_FREE);
    if (b->idx > 1)
      pmk_fence();
    pmk_heap_table_store(p, b->chunk, PMK_T_FREE);
    return 1;
  }
  uint64_t *w = &chunk_hdr(p, b->chunk)->bitmap[b->idx >> 6];
  uint64_t m = 1ull << (b->idx & 63);
  pmk_crash_point();
  uint64_t old = __atomic_fetch_and(w, ~m, __ATOMIC_SEQ_CST);
  if (flush)
    pmk_flush_line(w);
  return (old & m) != 0;
}

/* Release with the volatile bookkeeping of a running pool. */
int pmk_heap_do_free(pmkit_pool *p, struct blk *b, int flush) {
  if (!pmk_heap_release(p, b, flush))
    return pmk_err(PMKIT_E_INVAL,
                   "pmkit_free(%p): block is not allocated "
                   "(double free?)",
                   (void *)b->addr);
  if (b->large) {
    /* The freed entries must be durable before any chunk of the run is
     * reused: another thread's fence would not order this write-back. */
    pmk_fence();
    freemap_put(p, b->chunk, b->idx);
  } else if (atomic_load(&p->cstate[b->chunk]) == PMK_CS_DETACHED) {
    maybe_list(p, b->chunk, p->table[b->chunk] - 1);
  }
  return 0;
}

/* ---- public allocation API
 * -------------------------------------------------------- */

int pmkit_alloc(pmkit_pool *p, size_t size, void **out) {
  pmk_clear_err();
  if (PMK_UNLIKELY(!p || !out))
    return pmk_err(PMKIT_E_INVAL, "pmkit_alloc: NULL argument");
  struct pmk_tc *tc = pmk_tc(p);
  if (PMK_UNLIKELY(!tc))
    return pmk_err(PMKIT_E_NOMEM, "pmkit_alloc: no memory for thread cache");
  if (PMK_UNLIKELY(p->flags & PMKIT_POOL_INSPECT))
    return pmk_err(PMKIT_E_STATE, "pool is open for inspection only");
  if (PMK_UNLIKELY(tc->fase != NULL))
    return pmk_heap_fase_alloc(p, tc, size, out);
  struct blk b;
  int r = pmk_heap_reserve(p, tc, size, &b);
  if (PMK_UNLIKELY(r))
    return r;
  pmk_heap_commit(p, &b);
  /* A crash point after the store as well as before it: otherwise the
   * allocation and the caller's stores up to its next fence would look
   * atomic to crash-point campaigns, hiding ordering bugs in between. */
  pmk_crash_point();
  *out = (void *)b.addr;
  return 0;
}

int pmkit_zalloc(pmkit_pool *p, size_t size, void **out) {
  pmk_clear_err();
  int r = pmkit_alloc(p, size, out);
  if (r)
    return r;
  /* Durable before the caller can publish it: a store of the pointer may
   * come with no fence of the caller's own in between (robust mode's base
   * setting fences after that store), and the zeros must not be lost while
   * it persists. The fence also drains the allocation's write-back. */
  memset(*out, 0, size);
  pmkit_persist(*out, size);
  return 0;
}

int pmkit_free(pmkit_pool *p, void *ptr) {
  if (!ptr)
    return 0;
  if (!p)
    return pmk_err(PMKIT_E_INVAL, "pmkit_free: NULL pool");
  if (p->flags & PMKIT_POOL_INSPECT)
    return pmk_err(PMKIT_E_STATE, "pool is open for inspection only");
  struct blk b;
  if (pmk_heap_blk_at(p, (uintptr_t)ptr, &b))
    return pmk_err(PMKIT_E_INVAL,
                   "pmkit_free(%p): not the start of a block of this pool",
                   ptr);
  struct pmk_tc *tc = pmk_tc(p);
  if (PMK_UNLIKELY(tc && tc->fase != NULL)) {
    if (!pmk_heap_blk_live(p, &b))
      return pmk_err(PMKIT_E_INVAL, "pmkit_free(%p): block is not allocated",
                     ptr);
    return pmk_heap_fase_free(tc, &b);
  }
  int r = pmk_heap_do_free(p, &b, 0);
  pmk_crash_point(); /* see pmkit_alloc */
  return r;
}

size_t pmkit_usable_size(pmkit_pool *p, const void *ptr) {
  struct blk b;
  if (!p || pmk_heap_blk_at(p, (uintptr_t)ptr, &b) || !pmk_heap_blk_live(p, &b))
    return 0;
  return b.size;
}
