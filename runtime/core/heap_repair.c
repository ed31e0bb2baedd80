/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap_repair.c -- pmkit_pool_repair's work on the allocator: rebuild the
 * chunk table and bitmaps from the chunk headers and what the root and the
 * contexts reach, every change noted. Entry point: pmk_heap_repair.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapint.h"

/* ---- repair
 * ------------------------------------------------------------------ */

static void repair_table(pmkit_pool *p, struct pmk_repair *rp, uint32_t id,
                         uint32_t v, const char *why) {
  if (p->table[id] == v)
    return;
  pmk_heap_repair_note(rp, "chunk %u: table entry %#x -> %#x (%s)", id,
                       p->table[id], v, why);
  rp->stats->table_fixed++;
  pmk_heap_table_store(p, id, v);
}

int pmk_heap_repair(pmkit_pool *p, struct pmk_repair *rp) {
  pthread_once(&pmk_heap_cls_once, pmk_heap_cls_init);
  pmkit_repair_stats *rs = rp->stats;
  struct pmk_state *st = p->st;
  /* The root first: repair keeps what it reaches, so it must be sure of it.
   * Refused before anything is written. */
  if (pmk_heap_root_fields_ok(p))
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
    int small = pmk_heap_small_header(ch);
    uint32_t used = small ? pmk_heap_blocks_used(ch) : 0;
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
        pmk_heap_repair_note(rp,
                             "chunk %u: header rewritten for %u-byte blocks",
                             id, pmk_class_size[c]);
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
    if (pmk_heap_tail_clear(ch, nblocks_of(c)) < PMK_BITMAP_WORDS * 64) {
      pmk_heap_repair_note(rp, "chunk %u: bitmap bits past its %u blocks set",
                           id, nblocks_of(c));
      rs->headers_fixed++;
    }
    if (prov[id])
      pmk_heap_table_store(p, id, c + 1);
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
    int ok =
        !pmk_heap_blk_at(p, ra, &b) && b.addr == ra && b.size >= st->root_size;
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
  if ((r = pmk_heap_gc_mark(&g)) != 0) {
    pmk_heap_gc_free(&g);
    goto out;
  }
  /* Every small block is set: these point into chunks that are free now.
   * Pointers only: words that look like offsets are too often just
   * numbers. */
  if (g.dangling_ptrs) {
    pmk_heap_gc_free(&g);
    CONFLICT("%llu reachable pointers point into chunks with no table entry "
             "or header to rebuild them from: their blocks would be lost; "
             "nothing changed",
             (unsigned long long)g.dangling_ptrs);
  }
#undef CONFLICT
  pmkit_gc_stats gs = {0};
  pmk_heap_gc_sweep(&g, orig, rp, &gs, &rs->blocks_restored);
  for (uint32_t id = 0; id < p->nchunks; id++) {
    if (!prov[id])
      continue;
    uint32_t kept = 0; /* the sweep left exactly the marked blocks */
    for (uint32_t w = 0; g.marks[id] && w < PMK_BITMAP_WORDS; w++)
      kept += (uint32_t)__builtin_popcountll(g.marks[id][w]);
    if (kept)
      pmk_heap_repair_note(
          rp,
          "chunk %u: table entry 0 -> %#x (a free chunk with %u "
          "reachable blocks)",
          id, p->table[id], kept),
          rs->table_fixed++;
    else
      pmk_heap_table_store(p, id, PMK_T_FREE);
  }
  rs->blocks_kept = gs.blocks_live;
  rs->blocks_freed = gs.blocks_freed;
  rs->bytes_freed = gs.bytes_freed;
  pmk_heap_gc_free(&g);

  /* 4. The state page and the contexts. */
  if (!pmk_gen_ok(st->run_gen) || !pmk_gen_ok(st->run_gen + 1)) {
    pmk_heap_repair_note(rp, "state page: run generation %llu -> 1",
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
      pmk_heap_repair_note(
          rp, "context %u: state %#llx, reserved %#llx -> idle, 0", i,
          (unsigned long long)c->state, (unsigned long long)c->reserved);
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
