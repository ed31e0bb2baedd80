/* SPDX-License-Identifier: Apache-2.0 */
/*
 * layout.h -- the persistent layout of a pmkit pool.
 *
 * Pool layout (offsets from the fixed base address):
 *   [0, 4K)          pmk_hdr: immutable after create, checksummed
 *   [4K, 8K)         pmk_state: mutable words, each updated by one 8-byte store
 *   [8K, ...)        PMKIT_MAX_THREADS context slots of PMK_CTX_SIZE bytes
 *   table_off        chunk table: one uint32_t per chunk (the allocator's
 *                    commit point for chunks)
 *   heap_off         chunks of PMK_CHUNK bytes, 64 KiB aligned
 * A small-class chunk starts with a pmk_chunk header whose bitmap has one bit
 * per block (1 = allocated); a large allocation is a run of chunks whose
 * first table entry is PMK_T_HEAD | length.
 */
#ifndef PMKIT_CORE_LAYOUT_H
#define PMKIT_CORE_LAYOUT_H

#include <stdint.h>

#include "pmkit/abi.h"
#include "pmkit/pmkit.h"

#define PMK_MAGIC "PMKPOOL" /* 8 bytes with the NUL */
#define PMK_HDR_SIZE 4096u
#define PMK_STATE_OFF 4096u
#define PMK_CTX_OFF 8192u
#define PMK_CTX_SIZE 1024u
#define PMK_CHUNK (64u << 10)
#define PMK_CHUNK_SHIFT 16
#define PMK_CHUNK_HDR 1024u /* small chunk: header + bitmap, then blocks */
#define PMK_LARGE_HDR 64u   /* large run: header, then the block */
#define PMK_BITMAP_WORDS ((PMK_CHUNK_HDR - 64u) / 8u)
#define PMK_NCLASS 32u

/* Chunk table entries. */
#define PMK_T_FREE 0u
#define PMK_T_HEAD 0x80000000u /* | run length in chunks */
#define PMK_T_CONT 0x40000000u
#define PMK_T_LEN_MASK 0x3fffffffu
/* 1..PMK_NCLASS: a small chunk of class (entry - 1). */

struct pmk_hdr {
  char magic[8];
  uint32_t layout_version;
  uint32_t hdr_size;
  uint64_t size;
  uint64_t base;
  uint8_t uuid[16];
  char layout[PMKIT_LAYOUT_MAX];
  uint64_t ctx_off;
  uint32_t nctx, ctx_size;
  uint64_t table_off;
  uint64_t heap_off;
  uint64_t nchunks;
  uint64_t chunk_size;
  uint64_t created_ns;
  uint64_t checksum; /* FNV-1a 64 over the bytes before this field */
};

/* Run generations are 1 (create) and up, one per open: one that cannot be
 * bumped below this bound (no pool is opened 2^62 times) is corrupt, and
 * bumping it could wrap to 0. */
#define PMK_GEN_LIMIT (1ull << 62)
static inline int pmk_gen_ok(uint64_t gen) {
  return gen != 0 && gen + 1 < PMK_GEN_LIMIT; /* and one more open */
}

struct pmk_state {
  uint64_t run_gen;    /* bumped by every open; PM locks compare it */
  uint64_t root_off;   /* 0 = no root yet */
  uint64_t root_size;  /* bytes the root was created with */
  uint64_t root_check; /* pmk_root_word(root_off, root_size) */
};
/* The check word of the root fields. pmkit_root writes the size, the offset
 * and then this word, each fenced, so a crash can leave the word of no root
 * (pmk_root_word(0, 0)) beside a new root, which open completes; any other
 * mismatch (a zeroed or altered offset or size) is corruption. Never 0. */
static inline uint64_t pmk_root_word(uint64_t off, uint64_t size) {
  uint64_t h = (off ^ 0x6a09e667f3bcc908ull) * 0x9e3779b97f4a7c15ull ^ size;
  h = (h ^ h >> 31) * 0xbf58476d1ce4e5b9ull;
  return (h ^ h >> 29) | 1;
}

/* Context slot states (persistent). Layout version 2 also had a
 * committing state (2); it reads as corrupt now. */
#define PMK_CTX_IDLE 0u
#define PMK_CTX_ACTIVE 1u

/* Journal entry: pool offset of the block, bits 48..62 the chunk count of a
 * large block (0 for small). */
#define PMK_J_LEN_SHIFT 48
#define PMK_J_OFF_MASK ((1ull << 48) - 1)

/* An allocation journaled by a section: the entry and its check, in one
 * 16-byte pair (so in one cache line, written back together). */
struct pmk_jent {
  uint64_t e;
  uint64_t check; /* pmk_journal_check(e, index, seq); 0: retired */
};

struct pmk_ctx_pm {
  uint64_t state;
  uint64_t tag;
  uint64_t seq;      /* sections begun in this slot, ever */
  uint64_t reserved; /* 0 (version 2's journal count) */
  uint64_t ext[PMKIT_CTX_EXT_WORDS];
  /* Slots are PMK_CTX_SIZE apart, as the header says, so each starts a
   * cache line: state, tag, seq and the first four extension words share
   * one line, written back together. The journal has no count: its entries
   * are the leading ones whose check matches the section's number (layout
   * version 3), so an append needs one fence and stale entries of earlier
   * sections never count. */
  struct pmk_jent journal[PMKIT_JOURNAL_MAX];
};
_Static_assert(sizeof(struct pmk_ctx_pm) == PMK_CTX_SIZE, "context slot");

/* A slot's state word: PMK_CTX_* in the low byte. ACTIVE carries in the
 * rest a check of the tag and number begin wrote with it, so that begin
 * needs one fence: a crash that persisted the word without them leaves a
 * check that fails, and the slot reads as IDLE (the section never began:
 * none of its writes can persist before that fence). */
static inline uint64_t pmk_active_word(uint64_t tag, uint64_t seq) {
  uint64_t h = (tag ^ 0x5bd1e9955bd1e995ull) * 0x9e3779b97f4a7c15ull ^ seq;
  h = (h ^ h >> 32) * 0xd6e8feb86659fd93ull;
  return (h ^ h >> 32) << 8 | PMK_CTX_ACTIVE;
}
/* PMK_CTX_IDLE or _ACTIVE (or a corrupt word's value). */
static inline uint64_t pmk_ctx_state(const struct pmk_ctx_pm *c) {
  uint64_t s = c->state;
  if ((s & 0xff) != PMK_CTX_ACTIVE)
    return s;
  return s == pmk_active_word(c->tag, c->seq) ? PMK_CTX_ACTIVE : PMK_CTX_IDLE;
}
/* The check of journal entry e at index i of section seq; never 0. A crash
 * that persisted one word of the pair and not the other, or an entry left
 * by an earlier section, fails it. */
static inline uint64_t pmk_journal_check(uint64_t e, uint64_t i, uint64_t seq) {
  uint64_t h = (e ^ 0x2545f4914f6cdd1dull) * 0x9e3779b97f4a7c15ull ^
               (seq * PMKIT_JOURNAL_MAX + i);
  h = (h ^ h >> 29) * 0xbf58476d1ce4e5b9ull;
  return (h ^ h >> 32) | 1;
}
_Static_assert(PMK_CTX_OFF % 64 == 0 && PMK_CTX_SIZE % 64 == 0,
               "context slots start cache lines");

struct pmk_chunk {
  uint32_t cls; /* PMK_T_* copy or class+1, informational */
  uint32_t nblocks;
  uint64_t pad[7];
  uint64_t bitmap[PMK_BITMAP_WORDS];
};
_Static_assert(sizeof(struct pmk_chunk) == PMK_CHUNK_HDR, "chunk header");

#endif /* PMKIT_CORE_LAYOUT_H */
