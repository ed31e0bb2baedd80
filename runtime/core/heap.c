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
 * frees are deferred to commit, and a replayed section gets the same blocks
 * back in the same order. Entry points: pmkit_alloc, pmkit_free,
 * pmk_heap_open (rebuild after open), pmkit_pool_gc.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

const uint32_t pmk_class_size[PMK_NCLASS] = {
    16,   32,   48,   64,   80,   96,   112,  128,  160,  192,  224,
    256,  320,  384,  448,  512,  640,  768,  896,  1024, 1280, 1536,
    1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192};

static uint8_t cls_by16[65];  /* (size + 15) / 16 -> class, size <= 1024 */
static uint8_t cls_by128[65]; /* (size + 127) / 128 -> class, size <= 8192 */
static pthread_once_t cls_once = PTHREAD_ONCE_INIT;

static void cls_init(void) {
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

static inline uint32_t nblocks_of(unsigned c) {
  return (PMK_CHUNK - PMK_CHUNK_HDR) / pmk_class_size[c];
}

static inline uintptr_t chunk_addr(const pmkit_pool *p, uint32_t id) {
  return p->heap + ((uintptr_t)id << PMK_CHUNK_SHIFT);
}

static inline struct pmk_chunk *chunk_hdr(const pmkit_pool *p, uint32_t id) {
  return (struct pmk_chunk *)chunk_addr(p, id);
}

static void table_store(pmkit_pool *p, uint32_t id, uint32_t v) {
  pmk_crash_point();
  __atomic_store_n(&p->table[id], v, __ATOMIC_RELEASE);
  pmk_flush_line(&p->table[id]);
}

/* ---- block lookup ---------------------------------------------------------
 */

/* A live or dead block slot: where it is and how it is recorded. */
struct blk {
  uint32_t chunk; /* small: its chunk; large: the head chunk */
  uint32_t idx;   /* small: block index; large: run length */
  int large;
  uintptr_t addr;
  size_t size;
};

/* Find the block slot whose start is exactly `a`. Returns 0 or -1. */
static int blk_at(const pmkit_pool *p, uintptr_t a, struct blk *b) {
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

static int blk_live(const pmkit_pool *p, const struct blk *b) {
  if (b->large)
    return 1; /* a head entry is the allocation */
  uint64_t w = __atomic_load_n(&chunk_hdr(p, b->chunk)->bitmap[b->idx >> 6],
                               __ATOMIC_ACQUIRE);
  return (w >> (b->idx & 63)) & 1;
}

/* ---- volatile lists --------------------------------------------------------
 */

static void list_push(struct pmk_list *l, uint32_t id) {
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
    list_push(&p->partial[c], id);
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
  table_store(p, id, c + 1);
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

/* A large run: the head entry (the commit point) first, fenced before the
 * continuations and the chunk header, so that a continuation without a
 * head, or a free entry whose chunk header names a run, is corruption and
 * never a crash's leftover. The continuations could persist in any order (a
 * crash leaves a run with free entries inside it, which open completes), but
 * each is fenced: left unordered, the 2 entries of each 8-byte word of the
 * table made 3^8 crash images of a 1 MiB allocation for the explorer to
 * check, in every program that allocates one inside a FASE; fenced, 2 per
 * crash point. A fence per 64 KiB chunk costs nothing next to zeroing it. */
static void large_commit(pmkit_pool *p, uint32_t first, uint32_t n) {
  table_store(p, first, PMK_T_HEAD | n);
  pmk_fence();
  for (uint32_t i = 1; i < n; i++) {
    table_store(p, first + i, PMK_T_CONT);
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

static int reserve(pmkit_pool *p, struct pmk_tc *tc, size_t size,
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
static void commit(pmkit_pool *p, const struct blk *b) {
  if (b->large)
    large_commit(p, b->chunk, b->idx);
}

/* Mark one small block allocated (journal replay after a crash). */
static void set_bit(pmkit_pool *p, const struct blk *b) {
  uint64_t *w = &chunk_hdr(p, b->chunk)->bitmap[b->idx >> 6];
  pmk_crash_point();
  __atomic_fetch_or(w, 1ull << (b->idx & 63), __ATOMIC_RELAXED);
  pmk_flush_line(w);
}

/* Release a block in PM; 1 if it was live, 0 if already free. `flush`
 * writes a small block's bitmap word back (a large run's table entries
 * always are); pmkit_free does not: a lost free only leaks. */
static int release(pmkit_pool *p, const struct blk *b, int flush) {
  if (b->large) {
    if (p->table[b->chunk] != (PMK_T_HEAD | b->idx))
      return 0;
    /* The reverse of large_commit, each step fenced: every chunk's first
     * word (a free chunk must not look like one that holds blocks, and the
     * program's data there could), the continuations, then the head (the
     * commit point). A crash before the head leaves the run allocated (a
     * leak), with free entries inside it. */
    for (uint32_t i = 0; i < b->idx; i++) {
      struct pmk_chunk *ch = chunk_hdr(p, b->chunk + i);
      pmk_crash_point();
      __atomic_store_n(&ch->cls, 0, __ATOMIC_RELAXED);
      pmk_flush_line(ch);
    }
    pmk_fence();
    for (uint32_t i = b->idx; i-- > 1;)
      table_store(p, b->chunk + i, PMK_T_FREE);
    if (b->idx > 1)
      pmk_fence();
    table_store(p, b->chunk, PMK_T_FREE);
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
static int do_free(pmkit_pool *p, struct blk *b, int flush) {
  if (!release(p, b, flush))
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

/* ---- journaled allocation (failure-atomic sections)
 * ---------------------------- */

/* Journal entry e at the section's next index. The pair shares a line, and
 * its check stands for the order between its two words. A large run is
 * marked allocated after the entry: a fence orders them (without it a
 * crash could leak the run). A small block was marked when the thread
 * reserved it: its entry is durable by the section's next fence, and a
 * crash before leaks it as it leaks the reserved blocks not handed out. */
static void journal_append(struct pmk_ctx_pm *c, struct pmk_tc *tc, uint64_t e,
                           int fence) {
  struct pmk_jent *j = &c->journal[tc->nj];
  pmk_store64_line(&j->e, e);
  pmk_store64_line(&j->check, pmk_journal_check(e, tc->nj, c->seq));
  pmk_flush_line(j);
  if (fence)
    pmk_fence();
  tc->nj++;
}

uint64_t pmk_journal_count(const struct pmk_ctx_pm *c) {
  if (pmk_ctx_state(c) != PMK_CTX_ACTIVE)
    return 0;
  uint64_t n = 0;
  while (n < PMKIT_JOURNAL_MAX &&
         c->journal[n].check == pmk_journal_check(c->journal[n].e, n, c->seq))
    n++;
  return n;
}

static uint64_t entry_of(const pmkit_pool *p, const struct blk *b) {
  uint64_t e = (uint64_t)(b->addr - p->base);
  if (b->large)
    e |= (uint64_t)b->idx << PMK_J_LEN_SHIFT;
  return e;
}

/* Ensure a journaled allocation is marked allocated (idempotent). */
static void materialize(pmkit_pool *p, uint64_t e) {
  uint64_t off = e & PMK_J_OFF_MASK;
  uint32_t n = (uint32_t)(e >> PMK_J_LEN_SHIFT);
  uintptr_t a = p->base + off;
  if (n) {
    uint32_t first =
        (uint32_t)((a - PMK_LARGE_HDR - p->heap) >> PMK_CHUNK_SHIFT);
    if (p->table[first] != (PMK_T_HEAD | n))
      large_commit(p, first, n);
    return;
  }
  struct blk b;
  if (!blk_at(p, a, &b) && !blk_live(p, &b))
    set_bit(p, &b);
}

static void journal_materialize(pmkit_pool *p, struct pmk_ctx_pm *c) {
  for (uint64_t i = 0, n = pmk_journal_count(c); i < n; i++)
    materialize(p, c->journal[i].e);
}

void pmk_journal_release(pmkit_pool *p, struct pmk_ctx_pm *c, uint64_t from) {
  /* From the end, each entry is retired durably before its block is
   * released: once released, the block may be reallocated and published by
   * another thread, and a crash must not let the journal hand it out again.
   * A crash in between leaks the block instead. */
  for (uint64_t i = pmk_journal_count(c); i-- > from;) {
    uint64_t e = c->journal[i].e;
    pmk_store64(&c->journal[i].check, 0);
    pmk_fence();
    struct blk b;
    if (blk_at(p, p->base + (e & PMK_J_OFF_MASK), &b))
      continue;
    if (p->freemap)
      do_free(p, &b, 1);
    else
      release(p, &b, 1);
  }
}

void pmk_fase_frees_apply(pmkit_pool *p, struct pmk_tc *tc) {
  /* The commit is durable: a crash from here on loses the frees not yet
   * durable (their blocks leak; the thread's next fence ends that window),
   * never applies one twice. */
  for (uint32_t i = 0; i < tc->nfrees; i++) {
    struct blk b;
    if (!blk_at(p, tc->frees[i], &b) && blk_live(p, &b))
      do_free(p, &b, 1);
  }
  tc->nfrees = 0;
}

static int fase_alloc(pmkit_pool *p, struct pmk_tc *tc, size_t size,
                      void **out) {
  struct pmk_ctx_pm *c = tc->fase->pm;
  if (tc->replay) {
    if (tc->rcur < tc->nj) {
      uint64_t e = c->journal[tc->rcur].e;
      struct blk b;
      if (!blk_at(p, p->base + (e & PMK_J_OFF_MASK), &b) && b.size >= size) {
        tc->rcur++;
        materialize(p, e);
        *out = (void *)b.addr;
        return 0;
      }
      /* Re-execution diverged from the journal: drop the rest of it. */
      pmk_journal_release(p, c, tc->rcur);
      tc->nj = tc->rcur;
    }
    tc->replay = 0;
  }
  if (tc->nj >= PMKIT_JOURNAL_MAX)
    return pmk_err(PMKIT_E_NOSPC,
                   "more than %u allocations in one failure-atomic section",
                   PMKIT_JOURNAL_MAX);
  struct blk b;
  int r = reserve(p, tc, size, &b);
  if (r)
    return r;
  journal_append(c, tc, entry_of(p, &b), b.large);
  commit(p, &b);
  *out = (void *)b.addr;
  return 0;
}

/* Deferred to commit, in DRAM only: before the commit is durable the
 * section is re-executed (and frees again) or dropped. */
static int fase_free(struct pmk_tc *tc, struct blk *b) {
  if (tc->nfrees >= PMKIT_FASE_FREES_MAX)
    return pmk_err(PMKIT_E_NOSPC,
                   "more than %u frees in one failure-atomic section",
                   PMKIT_FASE_FREES_MAX);
  tc->frees[tc->nfrees++] = b->addr;
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
    return fase_alloc(p, tc, size, out);
  struct blk b;
  int r = reserve(p, tc, size, &b);
  if (PMK_UNLIKELY(r))
    return r;
  commit(p, &b);
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
  if (blk_at(p, (uintptr_t)ptr, &b))
    return pmk_err(PMKIT_E_INVAL,
                   "pmkit_free(%p): not the start of a block of this pool",
                   ptr);
  struct pmk_tc *tc = pmk_tc(p);
  if (PMK_UNLIKELY(tc && tc->fase != NULL)) {
    if (!blk_live(p, &b))
      return pmk_err(PMKIT_E_INVAL, "pmkit_free(%p): block is not allocated",
                     ptr);
    return fase_free(tc, &b);
  }
  int r = do_free(p, &b, 0);
  pmk_crash_point(); /* see pmkit_alloc */
  return r;
}

size_t pmkit_usable_size(pmkit_pool *p, const void *ptr) {
  struct blk b;
  if (!p || blk_at(p, (uintptr_t)ptr, &b) || !blk_live(p, &b))
    return 0;
  return b.size;
}

/* ---- open: repair and rebuild
 * ------------------------------------------------------ */

/* Is journal entry e plausible? Checked before anything trusts it: a bad
 * pool file must give PMKIT_E_CORRUPT, never a wild write. Entries of a
 * section a crash interrupted may name blocks not (or no longer)
 * allocated, so liveness is not required. */
static int journal_entry_ok(const pmkit_pool *p, uint64_t e) {
  uintptr_t a = p->base + (e & PMK_J_OFF_MASK);
  uint32_t n = (uint32_t)(e >> PMK_J_LEN_SHIFT);
  if (n >> 15 || a < p->heap || a >= chunk_addr(p, p->nchunks))
    return 0;
  uint32_t id = (uint32_t)((a - p->heap) >> PMK_CHUNK_SHIFT);
  uint32_t t = p->table[id];
  if (n) { /* a large allocation: a run start, inside the heap, over
            * chunks that are free or already this run */
    if (a != chunk_addr(p, id) + PMK_LARGE_HDR ||
        (uint64_t)id + n > p->nchunks ||
        (t != PMK_T_FREE && t != (PMK_T_HEAD | n)))
      return 0;
    for (uint32_t i = 1; i < n; i++)
      if (p->table[id + i] != PMK_T_FREE && p->table[id + i] != PMK_T_CONT)
        return 0;
    return 1;
  }
  if (t >= 1 && t <= PMK_NCLASS) { /* a small block slot */
    uint32_t bs = pmk_class_size[t - 1];
    uintptr_t ca = chunk_addr(p, id) + PMK_CHUNK_HDR;
    return a >= ca && (a - ca) % bs == 0 && (a - ca) / bs < nblocks_of(t - 1);
  }
  return 0;
}

static int journals_ok(pmkit_pool *p) {
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
    const struct pmk_ctx_pm *c = &p->ctxs[i];
    if (pmk_ctx_state(c) > PMK_CTX_ACTIVE)
      return pmk_err(PMKIT_E_CORRUPT, "context %u: bad state %llu", i,
                     (unsigned long long)c->state);
    if (c->reserved)
      return pmk_err(PMKIT_E_CORRUPT,
                     "context %u: reserved word is %#llx, not 0", i,
                     (unsigned long long)c->reserved);
    for (uint64_t j = 0, n = pmk_journal_count(c); j < n; j++)
      if (!journal_entry_ok(p, c->journal[j].e))
        return pmk_err(PMKIT_E_CORRUPT,
                       "context %u: journal entry %llu (%#llx) is not a block",
                       i, (unsigned long long)j,
                       (unsigned long long)c->journal[j].e);
  }
  return 0;
}

/* The first clear bitmap bit at or past nb (the tail, always set), or
 * PMK_BITMAP_WORDS * 64 if none. */
static uint32_t tail_clear(const struct pmk_chunk *ch, uint32_t nb) {
  for (uint32_t w = nb >> 6; w < PMK_BITMAP_WORDS; w++) {
    uint64_t need = w == nb >> 6 ? ~0ull << (nb & 63) : ~0ull;
    uint64_t miss = ~ch->bitmap[w] & need;
    if (miss)
      return w * 64 + (uint32_t)__builtin_ctzll(miss);
  }
  return PMK_BITMAP_WORDS * 64;
}

/* Is the chunk's header a small chunk's (class, block count, tail bits)? */
static int small_header(const struct pmk_chunk *ch) {
  return ch->cls >= 1 && ch->cls <= PMK_NCLASS &&
         ch->nblocks == nblocks_of(ch->cls - 1) &&
         tail_clear(ch, ch->nblocks) == PMK_BITMAP_WORDS * 64;
}

static uint32_t blocks_used(const struct pmk_chunk *ch) {
  uint32_t used = 0, nb = ch->nblocks;
  for (uint32_t w = 0; w < (nb + 63) / 64 && w < PMK_BITMAP_WORDS; w++)
    used += (uint32_t)__builtin_popcountll(
        ch->bitmap[w] & (w == nb >> 6 ? ~(~0ull << (nb & 63)) : ~0ull));
  return used;
}

/* The first n bytes of chunk id: with pread where there is a file, since
 * faulting in the free chunks of a tmpfs pool would allocate them. */
static int chunk_read(const pmkit_pool *p, uint32_t id, void *buf, size_t n) {
  if (p->fd < 0) {
    memcpy(buf, chunk_hdr(p, id), n);
    return 0;
  }
  off_t at = (off_t)(p->hdr->heap_off + ((uint64_t)id << PMK_CHUNK_SHIFT));
  return pread(p->fd, buf, n, at) == (ssize_t)n ? 0 : -1;
}

/* A chunk the table calls free: 0, or PMKIT_E_CORRUPT if its header says it
 * holds a large block or allocated small blocks, which only a lost table
 * entry explains (large_commit and release write the header after the head
 * entry and clear it before; a small chunk is freed only when empty). */
static int free_chunk_ok(const pmkit_pool *p, uint32_t id) {
  struct pmk_chunk h;
  if (chunk_read(p, id, &h, 8))
    return 0;
  if (h.cls & PMK_T_HEAD) {
    uint32_t n = h.cls & PMK_T_LEN_MASK;
    if (h.nblocks == 1 && n && (uint64_t)id + n <= p->nchunks)
      return pmk_err(PMKIT_E_CORRUPT,
                     "chunk %u: the table says free, but the chunk holds a "
                     "large block of %u chunks (its head entry is lost)",
                     id, n);
    return 0;
  }
  if (h.cls < 1 || h.cls > PMK_NCLASS || h.nblocks != nblocks_of(h.cls - 1))
    return 0;
  if (chunk_read(p, id, &h, sizeof h) || !small_header(&h))
    return 0; /* not a chunk header: data of a freed large run */
  uint32_t used = blocks_used(&h);
  if (used)
    return pmk_err(PMKIT_E_CORRUPT,
                   "chunk %u: the table says free, but the chunk holds %u "
                   "allocated blocks of %u bytes (its table entry is lost)",
                   id, used, pmk_class_size[h.cls - 1]);
  return 0;
}

/* Table entries and chunk headers, before anything trusts them; proportional
 * to the chunk table, not the heap. `gaps` (may be NULL) counts the free
 * entries inside large runs, which a crash during a large allocation or
 * free leaves and open completes. */
static int table_ok(pmkit_pool *p, uint64_t *gaps) {
  uint64_t g = 0;
  for (uint32_t id = 0; id < p->nchunks;) {
    uint32_t e = p->table[id];
    if (e & PMK_T_HEAD) {
      uint32_t n = e & PMK_T_LEN_MASK;
      if (n == 0 || (uint64_t)id + n > p->nchunks)
        return pmk_err(PMKIT_E_CORRUPT,
                       "chunk %u: run of %u chunks overruns the heap", id, n);
      const struct pmk_chunk *ch = chunk_hdr(p, id);
      if (small_header(ch) && blocks_used(ch))
        return pmk_err(PMKIT_E_CORRUPT,
                       "chunk %u: the table names a run of %u chunks, but the "
                       "chunk holds %u allocated blocks of %u bytes",
                       id, n, blocks_used(ch), pmk_class_size[ch->cls - 1]);
      for (uint32_t i = 1; i < n; i++) {
        uint32_t f = p->table[id + i];
        if (f != PMK_T_CONT && f != PMK_T_FREE)
          return pmk_err(PMKIT_E_CORRUPT,
                         "chunk %u: inside the run at chunk %u but marked "
                         "%#x",
                         id + i, id, f);
        if (f == PMK_T_FREE) { /* a crash's gap, or a lost entry */
          int r = free_chunk_ok(p, id + i);
          if (r)
            return r;
          g++;
        }
      }
      id += n;
      continue;
    }
    if (e == PMK_T_CONT)
      return pmk_err(PMKIT_E_CORRUPT,
                     "chunk %u: a continuation entry without a head (the "
                     "head entry of its run is lost)",
                     id);
    if (e > PMK_NCLASS)
      return pmk_err(PMKIT_E_CORRUPT, "chunk %u: bad table entry %#x", id, e);
    if (e == PMK_T_FREE) {
      int r = free_chunk_ok(p, id);
      if (r)
        return r;
    } else {
      struct pmk_chunk *ch = chunk_hdr(p, id);
      uint32_t nb = nblocks_of(e - 1);
      if (ch->cls != e || ch->nblocks != nb)
        return pmk_err(PMKIT_E_CORRUPT,
                       "chunk %u: header (class %u, %u blocks) disagrees "
                       "with table (class %u, %u blocks)",
                       id, ch->cls, ch->nblocks, e, nb);
      uint32_t i = tail_clear(ch, nb);
      if (i < PMK_BITMAP_WORDS * 64)
        return pmk_err(PMKIT_E_CORRUPT,
                       "chunk %u: bitmap bit %u, past its %u blocks, is "
                       "clear",
                       id, i, nb);
    }
    id++;
  }
  if (gaps)
    *gaps = g;
  return 0;
}

int pmk_heap_open(pmkit_pool *p, int repair) {
  pthread_once(&cls_once, cls_init);
  /* Everything is validated before anything is written: a pool refused
   * here is left as it was. */
  int r = table_ok(p, NULL);
  if (r || (r = journals_ok(p)) || (r = pmk_root_check(p)))
    return r;
  if (repair) {
    /* Journals first: they only need the persistent layout. */
    for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
      struct pmk_ctx_pm *c = &p->ctxs[i];
      uint64_t st = pmk_ctx_state(c);
      if (st == PMK_CTX_ACTIVE)
        journal_materialize(p, c);
    }
  }
  size_t fw = (p->nchunks + 63) / 64;
  p->freemap = calloc(fw ? fw : 1, sizeof(uint64_t));
  p->cstate = calloc(p->nchunks ? p->nchunks : 1, 1);
  if (!p->freemap || !p->cstate) {
    pmk_heap_close(p);
    return pmk_err(PMKIT_E_NOMEM, "no DRAM for the allocator's state");
  }
  pthread_mutex_init(&p->chunk_lock, NULL);
  for (unsigned c = 0; c < PMK_NCLASS; c++)
    pthread_mutex_init(&p->partial[c].lock, NULL);

  /* Chunks referenced by an in-flight journal must not be released. */
  uint8_t *pinned = calloc(p->nchunks ? p->nchunks : 1, 1);
  if (!pinned) {
    pmk_heap_close(p);
    return pmk_err(PMKIT_E_NOMEM, "no DRAM for the allocator's state");
  }
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
    struct pmk_ctx_pm *c = &p->ctxs[i];
    for (uint64_t j = 0, n = pmk_journal_count(c); j < n; j++) {
      uintptr_t a = p->base + (c->journal[j].e & PMK_J_OFF_MASK);
      if (a >= p->heap && a < chunk_addr(p, p->nchunks))
        pinned[(a - p->heap) >> PMK_CHUNK_SHIFT] = 1;
    }
  }

  for (uint32_t id = 0; id < p->nchunks;) {
    uint32_t e = p->table[id];
    if (e & PMK_T_HEAD) {
      uint32_t n = e & PMK_T_LEN_MASK; /* validated by table_ok */
      struct pmk_chunk *ch = chunk_hdr(p, id);
      /* Complete a run a crash interrupted (see large_commit). */
      for (uint32_t i = 1; i < n; i++)
        if (repair && p->table[id + i] != PMK_T_CONT)
          table_store(p, id + i, PMK_T_CONT);
      if (repair && (ch->cls != e || ch->nblocks != 1)) {
        ch->cls = e;
        ch->nblocks = 1;
        pmk_flush_line(ch);
      }
      id += n;
      continue;
    }
    if (e == PMK_T_FREE) {
      p->freemap[id >> 6] |= 1ull << (id & 63);
      id++;
      continue;
    }
    /* A small chunk: release it if empty, else make it available. */
    struct pmk_chunk *ch = chunk_hdr(p, id);
    uint32_t nb = nblocks_of(e - 1), used = blocks_used(ch);
    if (used == 0 && repair && !pinned[id]) {
      /* Frees are not written back (pmkit_free): the clear bits must be
       * durable before the free entry, or a crash could leave a free chunk
       * whose header still shows allocated blocks, which reads as a lost
       * table entry. */
      pmkit_flush(ch->bitmap, sizeof ch->bitmap);
      pmk_fence();
      table_store(p, id, PMK_T_FREE);
      p->freemap[id >> 6] |= 1ull << (id & 63);
    } else if (used < nb) {
      p->cstate[id] = PMK_CS_LISTED;
      list_push(&p->partial[e - 1], id);
    } else {
      p->cstate[id] = PMK_CS_DETACHED;
    }
    id++;
  }
  free(pinned);
  struct pmk_state *st = p->st;
  if (repair && st->root_off &&
      st->root_check != pmk_root_word(st->root_off, st->root_size))
    pmk_store64(&st->root_check, pmk_root_word(st->root_off, st->root_size));
  if (repair)
    pmk_fence();
  return 0;
}

void pmk_heap_close(pmkit_pool *p) {
  free(p->freemap);
  free(p->cstate);
  p->freemap = NULL;
  p->cstate = NULL;
  for (unsigned c = 0; c < PMK_NCLASS; c++) {
    free(p->partial[c].ids);
    p->partial[c].ids = NULL;
    p->partial[c].n = p->partial[c].cap = 0;
  }
}

/* ---- check
 * ------------------------------------------------------------------------------
 */

/* The root fields against their check word (see pmk_root_word). */
static int root_fields_ok(const pmkit_pool *p) {
  const struct pmk_state *st = p->st;
  if (st->root_check == pmk_root_word(st->root_off, st->root_size) ||
      st->root_check == pmk_root_word(0, 0))
    return 0;
  return pmk_err(PMKIT_E_CORRUPT,
                 "state page: the root fields (offset %#llx, %llu bytes) do "
                 "not match their check word",
                 (unsigned long long)st->root_off,
                 (unsigned long long)st->root_size);
}

int pmk_root_check(pmkit_pool *p) {
  const struct pmk_state *st = p->st;
  uint64_t off = st->root_off;
  int r = root_fields_ok(p);
  if (r || !off)
    return r;
  struct blk b;
  if (off < p->hdr->heap_off || off >= p->size ||
      blk_at(p, p->base + off, &b) || !blk_live(p, &b) ||
      b.addr != p->base + off)
    return pmk_err(PMKIT_E_CORRUPT,
                   "root object at offset %#llx is not an allocated block",
                   (unsigned long long)off);
  if (b.size < st->root_size)
    return pmk_err(PMKIT_E_CORRUPT,
                   "root object is a block of %zu bytes; %llu recorded", b.size,
                   (unsigned long long)st->root_size);
  return 0;
}

/* ---- reachability (check and gc)
 * ------------------------------------------------------------------ */

struct gc {
  pmkit_pool *p;
  uint64_t **marks; /* per chunk: one bit per block (large: bit 0) */
  uint32_t *head;   /* per chunk: its run's head chunk, or itself */
  uintptr_t *stack;
  size_t n, cap;
  int oom;
  unsigned flags;
  uintptr_t from;         /* the block being scanned (0: a root) */
  uint64_t dangling;      /* words pointing into free blocks or free chunks */
  uint64_t dangling_ptrs; /* of them, pointers (not offsets) */
  uintptr_t dang_at, dang_from;
};

/* The block slot containing heap address a, for the mark: 0 and *b if a
 * live block, 1 and *b if a small block slot that is free, 2 if a free
 * chunk, -1 if no block can be there (a chunk header). Interior pointers
 * count; O(1) per address (g->head). */
static int gc_slot(const struct gc *g, uintptr_t a, struct blk *b) {
  const pmkit_pool *p = g->p;
  uint32_t id = (uint32_t)((a - p->heap) >> PMK_CHUNK_SHIFT);
  uint32_t h = g->head[id], e = p->table[h];
  if (e & PMK_T_HEAD) {
    if (blk_at(p, chunk_addr(p, h) + PMK_LARGE_HDR, b) ||
        a < chunk_addr(p, h) + PMK_LARGE_HDR)
      return -1;
    return 0;
  }
  if (e == PMK_T_FREE || e == PMK_T_CONT || e > PMK_NCLASS)
    return 2;
  uintptr_t ca = chunk_addr(p, id);
  if (a < ca + PMK_CHUNK_HDR)
    return -1;
  uint32_t bs = pmk_class_size[e - 1];
  uint32_t idx = (uint32_t)(a - ca - PMK_CHUNK_HDR) / bs;
  if (idx >= nblocks_of(e - 1) ||
      blk_at(p, ca + PMK_CHUNK_HDR + (uintptr_t)idx * bs, b))
    return -1;
  return blk_live(p, b) ? 0 : 1;
}

/* Is pool offset off the block of an in-flight section's journal entry?
 * (allocated once the section is recovered) */
static int journaled(const pmkit_pool *p, uint64_t off) {
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
    const struct pmk_ctx_pm *c = &p->ctxs[i];
    for (uint64_t j = 0, n = pmk_journal_count(c); j < n; j++)
      if ((c->journal[j].e & PMK_J_OFF_MASK) == off)
        return 1;
  }
  return 0;
}

static void gc_ref(struct gc *g, uint64_t v) {
  pmkit_pool *p = g->p;
  uintptr_t a;
  if (v >= p->base && v < p->base + p->size)
    a = (uintptr_t)v;
  else if ((g->flags & PMKIT_GC_OFFSETS) && v >= p->hdr->heap_off &&
           v < p->size)
    a = p->base + v; /* a pool offset */
  else
    return;
  if (a < p->heap || a >= chunk_addr(p, p->nchunks))
    return;
  struct blk b;
  int k = gc_slot(g, a, &b);
  if (k < 0)
    return;
  if (k > 0) {
    /* A reachable word pointing into a free block or a free chunk: a lost
     * allocation bit or table entry, or a stale pointer (see
     * pmkit_check_report). A free block is still followed: if its bit was
     * lost, what it points to is live, and gc must not free it. */
    if (!journaled(p, (k == 1 ? b.addr : a) - p->base)) {
      g->dangling_ptrs += a == (uintptr_t)v;
      if (g->dangling++ == 0) {
        g->dang_at = a;
        g->dang_from = g->from;
      }
    }
    if (k == 2) {
      /* A free chunk has no blocks to follow: its whole content is, once
       * (a lost table entry must not let gc free what it points to). */
      uint32_t id = (uint32_t)((a - p->heap) >> PMK_CHUNK_SHIFT);
      b.chunk = id;
      b.large = 1;
      b.addr = chunk_addr(p, id) | 1; /* tag: scan the chunk */
    }
  }
  uint64_t **mk = &g->marks[b.chunk];
  if (!*mk && !(*mk = calloc(PMK_BITMAP_WORDS, sizeof(uint64_t)))) {
    g->oom = 1;
    return;
  }
  uint32_t i = b.large ? 0 : b.idx;
  if ((*mk)[i >> 6] >> (i & 63) & 1)
    return;
  (*mk)[i >> 6] |= 1ull << (i & 63);
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 256;
    uintptr_t *s = realloc(g->stack, cap * sizeof *s);
    if (!s) {
      g->oom = 1;
      return;
    }
    g->stack = s;
    g->cap = cap;
  }
  g->stack[g->n++] = b.addr;
}

/* Mark every block reachable from the root object and the contexts'
 * extension words. 0, or PMKIT_E_NOMEM (g->oom). */
static int gc_mark(struct gc *g) {
  pmkit_pool *p = g->p;
  g->marks = calloc(p->nchunks ? p->nchunks : 1, sizeof *g->marks);
  g->head = malloc((p->nchunks ? p->nchunks : 1) * sizeof *g->head);
  if (!g->marks || !g->head)
    return g->oom = 1, pmk_err(PMKIT_E_NOMEM, "no DRAM for marks");
  for (uint32_t id = 0; id < p->nchunks;) { /* table_ok validated runs */
    uint32_t e = p->table[id], n = e & PMK_T_HEAD ? e & PMK_T_LEN_MASK : 1;
    for (uint32_t i = 0; i < n; i++)
      g->head[id + i] = id;
    id += n;
  }
  if (p->st->root_off)
    gc_ref(g, p->base + p->st->root_off);
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
    struct pmk_ctx_pm *c = &p->ctxs[i];
    for (unsigned k = 0; k < PMKIT_CTX_EXT_WORDS; k++)
      if (c->ext[k] >= p->hdr->heap_off && c->ext[k] < p->size)
        gc_ref(g, p->base + c->ext[k]); /* documented as offsets */
      else
        gc_ref(g, c->ext[k]);
  }
  while (g->n && !g->oom) {
    uintptr_t a = g->stack[--g->n];
    struct blk b;
    size_t size = PMK_CHUNK; /* a free chunk (tagged) */
    if (a & 1)
      a &= ~(uintptr_t)1;
    else
      size = blk_at(p, a, &b) ? 0 : b.size;
    const uint64_t *w = (const uint64_t *)a;
    g->from = a;
    for (size_t k = 0; k < size / 8; k++)
      gc_ref(g, w[k]);
  }
  if (g->oom)
    return pmk_err(PMKIT_E_NOMEM, "no DRAM to finish marking");
  return 0;
}

static void gc_free(struct gc *g) {
  for (uint32_t id = 0; g->marks && id < g->p->nchunks; id++)
    free(g->marks[id]);
  free(g->marks);
  free(g->head);
  free(g->stack);
}

/* A note for the caller (at most a few hundred of them per repair). */
static void repair_note(const struct pmk_repair *rp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void repair_note(const struct pmk_repair *rp, const char *fmt, ...) {
  if (!rp || !rp->note)
    return;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  rp->note(rp->arg, line);
}

/* Free every allocated block the mark did not reach; count what is kept
 * and freed in st. With `orig` (repair: the bitmaps were all set for the
 * mark), each small chunk's bitmap becomes exactly the marked blocks,
 * `orig` says which were allocated before, the changes go to rp and the
 * blocks allocated again are added to *restored. Each
 * bitmap word and table entry is one store, so a crash leaves only some of
 * the unreachable blocks freed. */
static void gc_sweep(struct gc *g, uint64_t **orig, struct pmk_repair *rp,
                     pmkit_gc_stats *st, uint64_t *restored) {
  pmkit_pool *p = g->p;
  for (uint32_t id = 0; id < p->nchunks; id++) {
    uint32_t e = p->table[id];
    const uint64_t *mk = g->marks[id];
    if (e & PMK_T_HEAD) {
      struct blk b;
      blk_at(p, chunk_addr(p, id) + PMK_LARGE_HDR, &b);
      if (mk && (mk[0] & 1)) {
        st->blocks_live++;
      } else {
        repair_note(rp, "chunk %u: unreachable run of %u chunks freed", id,
                    b.idx);
        release(p, &b, 1);
        st->blocks_freed++;
        st->bytes_freed += b.size;
      }
      continue;
    }
    if (e < 1 || e > PMK_NCLASS)
      continue;
    struct pmk_chunk *ch = chunk_hdr(p, id);
    uint32_t nb = nblocks_of(e - 1), freed = 0, back = 0;
    for (uint32_t w = 0; w < (nb + 63) / 64; w++) {
      uint64_t blocks = w == nb >> 6 ? ~(~0ull << (nb & 63)) : ~0ull;
      uint64_t now = ch->bitmap[w], live = mk ? mk[w] & blocks : 0;
      uint64_t was = (orig ? (orig[id] ? orig[id][w] : 0) : now) & blocks;
      /* gc only frees: a marked free block (a suspect) stays free. A
       * repair sets exactly the marked blocks, and the tail bits. */
      uint64_t want = orig ? ~blocks | live : now & (~blocks | live);
      if (!orig)
        live &= now;
      st->blocks_live += (uint32_t)__builtin_popcountll(live);
      freed += (uint32_t)__builtin_popcountll(was & ~live);
      back += (uint32_t)__builtin_popcountll(live & ~was);
      if (want != now) {
        pmk_crash_point();
        __atomic_store_n(&ch->bitmap[w], want, __ATOMIC_RELAXED);
        pmk_flush_line(&ch->bitmap[w]);
      }
    }
    if (freed || back)
      repair_note(rp,
                  "chunk %u (%u-byte blocks): %u unreachable block%s freed, "
                  "%u reachable block%s marked allocated",
                  id, pmk_class_size[e - 1], freed, freed == 1 ? "" : "s", back,
                  back == 1 ? "" : "s");
    st->blocks_freed += freed;
    st->bytes_freed += (uint64_t)freed * pmk_class_size[e - 1];
    if (restored)
      *restored += back;
  }
  pmk_fence();
}

int pmk_heap_check(pmkit_pool *p, pmkit_pool_info *info,
                   pmkit_check_report *report, unsigned flags) {
  pthread_once(&cls_once, cls_init);
  uint64_t gaps = 0;
  int r = table_ok(p, &gaps);
  if (r || (r = journals_ok(p)))
    return r;
  uint64_t used = 0, bytes = 0, nfree = 0, nsmall = 0, nlarge = 0;
  for (uint32_t id = 0; id < p->nchunks;) {
    uint32_t e = p->table[id];
    if (e & PMK_T_HEAD) {
      uint32_t n = e & PMK_T_LEN_MASK;
      nlarge += n;
      used++;
      bytes += ((uint64_t)n << PMK_CHUNK_SHIFT) - PMK_LARGE_HDR;
      id += n;
      continue;
    }
    if (e == PMK_T_FREE) {
      nfree++;
      id++;
      continue;
    }
    uint32_t n = blocks_used(chunk_hdr(p, id));
    used += n;
    bytes += (uint64_t)n * pmk_class_size[e - 1];
    nsmall++;
    id++;
  }
  if ((r = pmk_root_check(p)) != 0)
    return r;
  if (report) { /* what the root and the contexts reach */
    struct gc g = {.p = p, .flags = flags};
    r = gc_mark(&g);
    gc_free(&g);
    if (r)
      return r;
    report->run_gaps = gaps;
    report->suspects = g.dangling;
    report->suspect_off = g.dangling ? g.dang_at - p->base : 0;
    report->suspect_from = g.dang_from ? g.dang_from - p->base : 0;
  }
  if (info) {
    info->blocks_used = used;
    info->bytes_used = bytes;
    info->chunks_free = nfree;
    info->chunks_small = nsmall;
    info->chunks_large = nlarge;
  }
  return 0;
}

int pmkit_pool_gc(pmkit_pool *p, unsigned flags, pmkit_gc_stats *stats) {
  pmk_clear_err();
  if (!p)
    return pmk_err(PMKIT_E_INVAL, "pmkit_pool_gc: NULL pool");
  if (p->flags & PMKIT_POOL_INSPECT)
    return pmk_err(PMKIT_E_STATE, "pool is open for inspection only");
  /* gc frees what it cannot reach: on metadata it cannot trust (a corrupt
   * root offset, a zeroed state page) that would be every live block. */
  if (pmkit_pool_check(p) != 0)
    return pmk_err_wrap(PMKIT_E_CORRUPT, "the pool is inconsistent", " (",
                        "): gc freed nothing");
  /* A section in flight will be re-executed or rolled back: the blocks it
   * frees, or unpublished, may be live again afterwards. */
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++)
    if (pmk_ctx_state(&p->ctxs[i]) == PMK_CTX_ACTIVE)
      return pmk_err(PMKIT_E_STATE,
                     "context %u has a failure-atomic section in flight: "
                     "recover the pool (pmkit_recover) before gc",
                     i);
  pmk_tc_unreserve(p); /* release the caller's reservations, not sweep them */
  struct gc g = {.p = p, .flags = flags};
  pmkit_gc_stats st = {0};
  int r = gc_mark(&g);
  if (r)
    pmk_err_wrap(r, "", "", "; nothing freed");
  else
    gc_sweep(&g, NULL, NULL, &st, NULL);
  st.suspects = g.dangling;
  gc_free(&g);
  if (stats)
    *stats = st;
  if (r)
    return r;
  /* Rebuild the volatile state; thread caches see a new serial. */
  /* Rebuild the volatile state. Thread caches see a new serial and start
   * afresh; the caller keeps its context slot and section. */
  struct pmk_tc *tc = pmk_tcs[p->id], saved;
  int mine = tc && tc->serial == p->serial;
  if (mine)
    saved = *tc;
  pmk_heap_close(p);
  p->serial = pmk_next_serial();
  r = pmk_heap_open(p, 1);
  if (mine && (tc = pmk_tc(p)) != NULL) {
    tc->ctx = saved.ctx;
    tc->fase = saved.fase;
    tc->replay = saved.replay;
    tc->rcur = saved.rcur;
  }
  return r;
}

/* ---- repair
 * ------------------------------------------------------------------ */

static void repair_table(pmkit_pool *p, struct pmk_repair *rp, uint32_t id,
                         uint32_t v, const char *why) {
  if (p->table[id] == v)
    return;
  repair_note(rp, "chunk %u: table entry %#x -> %#x (%s)", id, p->table[id], v,
              why);
  rp->stats->table_fixed++;
  table_store(p, id, v);
}

int pmk_heap_repair(pmkit_pool *p, struct pmk_repair *rp) {
  pthread_once(&cls_once, cls_init);
  pmkit_repair_stats *rs = rp->stats;
  struct pmk_state *st = p->st;
  /* The root first: repair keeps what it reaches, so it must be sure of it.
   * Refused before anything is written. */
  if (root_fields_ok(p))
    return pmk_err_wrap(PMKIT_E_CORRUPT, "", "",
                        ": repair cannot tell what the pool's data is; "
                        "nothing changed");
  if (st->root_off &&
      (st->root_off < p->hdr->heap_off || st->root_off >= p->size))
    return pmk_err(PMKIT_E_CORRUPT,
                   "the root offset %#llx is outside the heap; nothing "
                   "changed",
                   (unsigned long long)st->root_off);
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++)
    if (pmk_ctx_state(&p->ctxs[i]) == PMK_CTX_ACTIVE)
      return pmk_err(PMKIT_E_STATE,
                     "context %u has a failure-atomic section in flight: "
                     "recovery must finish it (open the pool with its "
                     "program) before a repair; nothing changed",
                     i);

  /* 1. The chunk layout, from the table where it agrees with the chunk
   *    headers and from the headers where the table lost an entry. Where
   *    the two disagree and both are plausible (a run of another length, a
   *    small chunk of another class, a run over a chunk with blocks), there
   *    is no telling which is right: refused. Small chunks keep every block
   *    for now (all bits set): what is reachable decides below. `orig` keeps
   *    the bitmaps as they were. */
  uint64_t **orig = calloc(p->nchunks ? p->nchunks : 1, sizeof *orig);
  uint8_t *prov = calloc(p->nchunks ? p->nchunks : 1, 1);
  if (!orig || !prov) {
    free(orig);
    free(prov);
    return pmk_err(PMKIT_E_NOMEM, "no DRAM for the repair");
  }
  int r = 0;
#define CONFLICT(...)                                                          \
  do {                                                                         \
    r = pmk_err(PMKIT_E_CORRUPT, __VA_ARGS__);                                 \
    goto out;                                                                  \
  } while (0)
  for (uint32_t id = 0; id < p->nchunks;) {
    uint32_t e = p->table[id];
    struct pmk_chunk *ch = chunk_hdr(p, id);
    int small = small_header(ch);
    uint32_t used = small ? blocks_used(ch) : 0;
    uint32_t tn = (e & PMK_T_HEAD) ? e & PMK_T_LEN_MASK : 0;
    uint32_t hn = (ch->cls & PMK_T_HEAD) && ch->nblocks == 1
                      ? ch->cls & PMK_T_LEN_MASK
                      : 0;
    if (tn && (uint64_t)id + tn > p->nchunks)
      tn = 0; /* an impossible run: the table entry is garbage */
    if (hn && (uint64_t)id + hn > p->nchunks)
      hn = 0;
    uint32_t n = tn                                                       ? tn
                 : (e == PMK_T_FREE || e == PMK_T_CONT || e > PMK_NCLASS) ? hn
                                                                          : 0;
    if (tn && hn && tn != hn)
      CONFLICT("chunk %u: the table names a run of %u chunks, its header "
               "one of %u: repair cannot tell which; nothing changed",
               id, tn, hn);
    if (tn && used)
      CONFLICT("chunk %u: the table names a run, its header a chunk with %u "
               "allocated blocks: repair cannot tell which; nothing changed",
               id, used);
    if (n) {
      for (uint32_t i = 1; i < n; i++)
        if (p->table[id + i] != PMK_T_CONT && p->table[id + i] != PMK_T_FREE)
          CONFLICT("chunk %u: inside the run at chunk %u, but its table "
                   "entry is %#x: repair cannot tell which is right; "
                   "nothing changed",
                   id + i, id, p->table[id + i]);
      repair_table(p, rp, id, PMK_T_HEAD | n, "its header names the run");
      for (uint32_t i = 1; i < n; i++)
        repair_table(p, rp, id + i, PMK_T_CONT, "inside a run");
      if (ch->cls != (PMK_T_HEAD | n) || ch->nblocks != 1) {
        ch->cls = PMK_T_HEAD | n;
        ch->nblocks = 1;
        pmk_flush_line(ch);
        rs->headers_fixed++;
      }
      id += n;
      continue;
    }
    unsigned c = PMK_NCLASS;
    if (e >= 1 && e <= PMK_NCLASS) {
      if (small && ch->cls != e)
        CONFLICT("chunk %u: the table says %u-byte blocks, its header %u-byte "
                 "blocks: repair cannot tell which; nothing changed",
                 id, pmk_class_size[e - 1], pmk_class_size[ch->cls - 1]);
      c = e - 1;
      if (!small) { /* the table's class, a fresh header */
        repair_note(rp, "chunk %u: header rewritten for %u-byte blocks", id,
                    pmk_class_size[c]);
        rs->headers_fixed++;
        ch->cls = c + 1;
        ch->nblocks = nblocks_of(c);
        pmk_flush_line(ch);
      }
    } else if (small && (e > PMK_NCLASS || used)) {
      c = ch->cls - 1; /* a lost or altered table entry */
    } else if (small && e == PMK_T_FREE) {
      /* An empty small chunk the table calls free: what open makes of a
       * chunk whose bits were all lost. Kept below only if the mark finds
       * blocks in it. */
      c = ch->cls - 1;
      prov[id] = 1;
    }
    if (c == PMK_NCLASS) {
      repair_table(p, rp, id, PMK_T_FREE, "no chunk here");
      id++;
      continue;
    }
    if (!(orig[id] = malloc(sizeof ch->bitmap))) {
      r = pmk_err(PMKIT_E_NOMEM, "no DRAM for the repair");
      goto out;
    }
    memcpy(orig[id], ch->bitmap, sizeof ch->bitmap);
    if (tail_clear(ch, nblocks_of(c)) < PMK_BITMAP_WORDS * 64) {
      repair_note(rp, "chunk %u: bitmap bits past its %u blocks set", id,
                  nblocks_of(c));
      rs->headers_fixed++;
    }
    if (prov[id])
      table_store(p, id, c + 1);
    else
      repair_table(p, rp, id, c + 1, "its header names the class");
    memset(ch->bitmap, 0xff, sizeof ch->bitmap);
    id++;
  }

  /* 2. The root must be a block of the rebuilt layout that was allocated
   *    (before every bit was set for the mark). */
  if (st->root_off) {
    struct blk b;
    uintptr_t ra = p->base + st->root_off;
    int ok = !blk_at(p, ra, &b) && b.addr == ra && b.size >= st->root_size;
    if (ok && !b.large)
      ok = orig[b.chunk] && (orig[b.chunk][b.idx >> 6] >> (b.idx & 63) & 1);
    if (!ok)
      CONFLICT("the root object (offset %#llx, %llu bytes) is not an "
               "allocated block: repair cannot tell what the pool's data is; "
               "nothing changed",
               (unsigned long long)st->root_off,
               (unsigned long long)st->root_size);
  }

  /* 3. Keep what the root and the contexts reach (pointers and offsets),
   *    free the rest. */
  struct gc g = {.p = p, .flags = PMKIT_GC_OFFSETS};
  if ((r = gc_mark(&g)) != 0) {
    gc_free(&g);
    goto out;
  }
  /* Every small block is set: these point into chunks that are free now.
   * Pointers only: words that look like offsets are too often just
   * numbers. */
  if (g.dangling_ptrs) {
    gc_free(&g);
    CONFLICT("%llu reachable pointers point into chunks with no table entry "
             "or header to rebuild them from: their blocks would be lost; "
             "nothing changed",
             (unsigned long long)g.dangling_ptrs);
  }
#undef CONFLICT
  pmkit_gc_stats gs = {0};
  gc_sweep(&g, orig, rp, &gs, &rs->blocks_restored);
  for (uint32_t id = 0; id < p->nchunks; id++) {
    if (!prov[id])
      continue;
    uint32_t kept = 0; /* the sweep left exactly the marked blocks */
    for (uint32_t w = 0; g.marks[id] && w < PMK_BITMAP_WORDS; w++)
      kept += (uint32_t)__builtin_popcountll(g.marks[id][w]);
    if (kept)
      repair_note(rp,
                  "chunk %u: table entry 0 -> %#x (a free chunk with %u "
                  "reachable blocks)",
                  id, p->table[id], kept),
          rs->table_fixed++;
    else
      table_store(p, id, PMK_T_FREE);
  }
  rs->blocks_kept = gs.blocks_live;
  rs->blocks_freed = gs.blocks_freed;
  rs->bytes_freed = gs.bytes_freed;
  gc_free(&g);

  /* 4. The state page and the contexts. */
  if (!pmk_gen_ok(st->run_gen) || !pmk_gen_ok(st->run_gen + 1)) {
    repair_note(rp, "state page: run generation %llu -> 1",
                (unsigned long long)st->run_gen);
    pmk_store64(&st->run_gen, 1);
    rs->state_fixed++;
  }
  uint64_t w = pmk_root_word(st->root_off, st->root_size);
  if (st->root_check != w) {
    pmk_store64(&st->root_check, w);
    rs->state_fixed++;
  }
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
    struct pmk_ctx_pm *c = &p->ctxs[i];
    if (pmk_ctx_state(c) > PMK_CTX_ACTIVE || c->reserved) {
      repair_note(rp, "context %u: state %#llx, reserved %#llx -> idle, 0", i,
                  (unsigned long long)c->state,
                  (unsigned long long)c->reserved);
      pmk_store64_line(&c->state, PMK_CTX_IDLE);
      pmk_store64_line(&c->reserved, 0);
      pmk_flush_line(c);
      rs->contexts_fixed++;
    }
  }
  pmk_fence();
out:
  for (uint32_t id = 0; id < p->nchunks; id++)
    free(orig[id]);
  free(orig);
  free(prov);
  return r;
}
