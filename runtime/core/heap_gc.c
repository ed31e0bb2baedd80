/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap_gc.c -- what the root and the context slots reach, word by word
 * (conservatively: anything that looks like a pointer or, with
 * PMKIT_GC_OFFSETS, a pool offset into a live block), for the check's
 * report and for pmkit_pool_gc, which frees what nothing reaches. Entry
 * point: pmkit_pool_gc.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapint.h"

/* ---- reachability (check and gc)
 * ------------------------------------------------------------------ */

/* The block slot containing heap address a, for the mark: 0 and *b if a
 * live block, 1 and *b if a small block slot that is free, 2 if a free
 * chunk, -1 if no block can be there (a chunk header). Interior pointers
 * count; O(1) per address (g->head). */
static int gc_slot(const struct gc *g, uintptr_t a, struct blk *b) {
  const pmkit_pool *p = g->p;
  uint32_t id = (uint32_t)((a - p->heap) >> PMK_CHUNK_SHIFT);
  uint32_t h = g->head[id], e = p->table[h];
  if (e & PMK_T_HEAD) {
    if (pmk_heap_blk_at(p, chunk_addr(p, h) + PMK_LARGE_HDR, b) ||
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
      pmk_heap_blk_at(p, ca + PMK_CHUNK_HDR + (uintptr_t)idx * bs, b))
    return -1;
  return pmk_heap_blk_live(p, b) ? 0 : 1;
}

/* Is pool offset off the block of an in-flight section's journal entry?
 * (allocated once the section is recovered) */
int pmk_heap_journaled(const pmkit_pool *p, uint64_t off) {
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
    if (!pmk_heap_journaled(p, (k == 1 ? b.addr : a) - p->base)) {
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
int pmk_heap_gc_mark(struct gc *g) {
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
      size = pmk_heap_blk_at(p, a, &b) ? 0 : b.size;
    const uint64_t *w = (const uint64_t *)a;
    g->from = a;
    for (size_t k = 0; k < size / 8; k++)
      gc_ref(g, w[k]);
  }
  if (g->oom)
    return pmk_err(PMKIT_E_NOMEM, "no DRAM to finish marking");
  return 0;
}

void pmk_heap_gc_free(struct gc *g) {
  for (uint32_t id = 0; g->marks && id < g->p->nchunks; id++)
    free(g->marks[id]);
  free(g->marks);
  free(g->head);
  free(g->stack);
}

/* A note for the caller (at most a few hundred of them per repair). */
void pmk_heap_repair_note(const struct pmk_repair *rp, const char *fmt, ...) {
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
void pmk_heap_gc_sweep(struct gc *g, uint64_t **orig, struct pmk_repair *rp,
                       pmkit_gc_stats *st, uint64_t *restored) {
  pmkit_pool *p = g->p;
  for (uint32_t id = 0; id < p->nchunks; id++) {
    uint32_t e = p->table[id];
    const uint64_t *mk = g->marks[id];
    if (e & PMK_T_HEAD) {
      struct blk b;
      pmk_heap_blk_at(p, chunk_addr(p, id) + PMK_LARGE_HDR, &b);
      if (mk && (mk[0] & 1)) {
        st->blocks_live++;
      } else {
        pmk_heap_repair_note(rp, "chunk %u: unreachable run of %u chunks freed",
                             id, b.idx);
        pmk_heap_release(p, &b, 1);
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
      pmk_heap_repair_note(
          rp,
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
  pthread_once(&pmk_heap_cls_once, pmk_heap_cls_init);
  uint64_t gaps = 0;
  int r = pmk_heap_table_ok(p, &gaps);
  if (r || (r = pmk_heap_journals_ok(p)))
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
    uint32_t n = pmk_heap_blocks_used(chunk_hdr(p, id));
    used += n;
    bytes += (uint64_t)n * pmk_class_size[e - 1];
    nsmall++;
    id++;
  }
  if ((r = pmk_root_check(p)) != 0)
    return r;
  if (report) { /* what the root and the contexts reach */
    struct gc g = {.p = p, .flags = flags};
    r = pmk_heap_gc_mark(&g);
    pmk_heap_gc_free(&g);
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
  int r = pmk_heap_gc_mark(&g);
  if (r)
    pmk_err_wrap(r, "", "", "; nothing freed");
  else
    pmk_heap_gc_sweep(&g, NULL, NULL, &st, NULL);
  st.suspects = g.dangling;
  pmk_heap_gc_free(&g);
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
