/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap_open.c -- a pool's allocator at open: finish the journals a crash
 * left, repair its benign leftovers, rebuild the volatile state (lists,
 * free-chunk map) from the chunk table and bitmaps; and the check of the
 * allocator metadata and the root. Entry points: pmk_heap_open,
 * pmk_heap_close, pmk_heap_check, pmk_root_check.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapint.h"

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

int pmk_heap_journals_ok(pmkit_pool *p) {
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
uint32_t pmk_heap_tail_clear(const struct pmk_chunk *ch, uint32_t nb) {
  for (uint32_t w = nb >> 6; w < PMK_BITMAP_WORDS; w++) {
    uint64_t need = w == nb >> 6 ? ~0ull << (nb & 63) : ~0ull;
    uint64_t miss = ~ch->bitmap[w] & need;
    if (miss)
      return w * 64 + (uint32_t)__builtin_ctzll(miss);
  }
  return PMK_BITMAP_WORDS * 64;
}

/* Is the chunk's header a small chunk's (class, block count, tail bits)? */
int pmk_heap_small_header(const struct pmk_chunk *ch) {
  return ch->cls >= 1 && ch->cls <= PMK_NCLASS &&
         ch->nblocks == nblocks_of(ch->cls - 1) &&
         pmk_heap_tail_clear(ch, ch->nblocks) == PMK_BITMAP_WORDS * 64;
}

uint32_t pmk_heap_blocks_used(const struct pmk_chunk *ch) {
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
 * entry explains (large_commit and release write the header
 * after the head entry and clear it before; a small chunk is freed only when
 * empty). */
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
  if (chunk_read(p, id, &h, sizeof h) || !pmk_heap_small_header(&h))
    return 0; /* not a chunk header: data of a freed large run */
  uint32_t used = pmk_heap_blocks_used(&h);
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
int pmk_heap_table_ok(pmkit_pool *p, uint64_t *gaps) {
  uint64_t g = 0;
  for (uint32_t id = 0; id < p->nchunks;) {
    uint32_t e = p->table[id];
    if (e & PMK_T_HEAD) {
      uint32_t n = e & PMK_T_LEN_MASK;
      if (n == 0 || (uint64_t)id + n > p->nchunks)
        return pmk_err(PMKIT_E_CORRUPT,
                       "chunk %u: run of %u chunks overruns the heap", id, n);
      const struct pmk_chunk *ch = chunk_hdr(p, id);
      if (pmk_heap_small_header(ch) && pmk_heap_blocks_used(ch))
        return pmk_err(PMKIT_E_CORRUPT,
                       "chunk %u: the table names a run of %u chunks, but the "
                       "chunk holds %u allocated blocks of %u bytes",
                       id, n, pmk_heap_blocks_used(ch),
                       pmk_class_size[ch->cls - 1]);
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
      uint32_t i = pmk_heap_tail_clear(ch, nb);
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
  pthread_once(&pmk_heap_cls_once, pmk_heap_cls_init);
  /* Everything is validated before anything is written: a pool refused
   * here is left as it was. */
  int r = pmk_heap_table_ok(p, NULL);
  if (r || (r = pmk_heap_journals_ok(p)) || (r = pmk_root_check(p)))
    return r;
  if (repair) {
    /* Journals first: they only need the persistent layout. */
    for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
      struct pmk_ctx_pm *c = &p->ctxs[i];
      uint64_t st = pmk_ctx_state(c);
      if (st == PMK_CTX_ACTIVE)
        pmk_heap_journal_materialize(p, c);
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
          pmk_heap_table_store(p, id + i, PMK_T_CONT);
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
    uint32_t nb = nblocks_of(e - 1), used = pmk_heap_blocks_used(ch);
    if (used == 0 && repair && !pinned[id]) {
      /* Frees are not written back (pmkit_free): the clear bits must be
       * durable before the free entry, or a crash could leave a free chunk
       * whose header still shows allocated blocks, which reads as a lost
       * table entry. */
      pmkit_flush(ch->bitmap, sizeof ch->bitmap);
      pmk_fence();
      pmk_heap_table_store(p, id, PMK_T_FREE);
      p->freemap[id >> 6] |= 1ull << (id & 63);
    } else if (used < nb) {
      p->cstate[id] = PMK_CS_LISTED;
      pmk_heap_list_push(&p->partial[e - 1], id);
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
int pmk_heap_root_fields_ok(const pmkit_pool *p) {
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
  int r = pmk_heap_root_fields_ok(p);
  if (r || !off)
    return r;
  struct blk b;
  if (off < p->hdr->heap_off || off >= p->size ||
      pmk_heap_blk_at(p, p->base + off, &b) || !pmk_heap_blk_live(p, &b) ||
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
