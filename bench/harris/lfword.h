/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lfword.h -- the link words of the lock-free workloads (harris, lfhash,
 * nmbst) and how each variant makes them durable. A link word holds a node
 * pointer and two algorithm bits (Harris's mark, Natarajan-Mittal's flag and
 * tag); it is read only with lf_load and changed only with lf_cas, and a
 * node is filled in before lf_publish, then linked by one lf_cas. The
 * variants differ only here:
 *   volatile, hand-eadr  plain C11 atomics; under eADR a store is durable
 *                        once it retires, so program order is enough.
 *   hand-adr             link-and-persist: a CAS writes the new value with
 *                        LF_DIRTY set, flushes and fences the word, then
 *                        clears the bit. Whoever reads a dirty word flushes
 *                        and fences it before acting on it, so no thread
 *                        (and no operation's result) ever depends on a link
 *                        that a crash could still lose; a new node is
 *                        flushed before the CAS that links it.
 *   pmdk                 Mirror-style (Friedman et al., PLDI'21): two
 *                        replicas of every node, the persistent one in the
 *                        PMDK pool (PMDK's atomic allocator) and a volatile
 *                        one in DRAM, lf_delta bytes away. Readers walk the
 *                        volatile one; a CAS changes the persistent word,
 *                        persists it, then the volatile word. Every expected
 *                        value comes from the volatile word, so that word
 *                        lags the persistent one by at most one CAS, and a
 *                        thread whose CAS fails behind such a lag persists
 *                        and mirrors the value for the writer (lock-free
 *                        helping): a value seen in the volatile replica is
 *                        already durable. Words carry a 16-bit version (bits
 *                        48-63) so that a late mirroring CAS cannot land on
 *                        a word that came back to an earlier pointer (that
 *                        would take 65536 CASes of one word while a thread
 *                        stalls in lf_cas). After a reopen the workload's
 *                        attach copies the reachable persistent nodes into
 *                        the volatile replica.
 *   ssapp                plain C11 atomics in FASEs, which ssapp mode makes
 *                        detectable: its CASes leave a tag in bits 48-63,
 *                        which lf_load drops (outside FASEs too: the
 *                        checkers' reads).
 * Pointers are canonical (persistent) addresses in every variant; lf_v(p)
 * is the replica that readers use for a node's immutable fields.
 */
#ifndef PMKIT_BENCH_LFWORD_H
#define PMKIT_BENCH_LFWORD_H

#include <stdint.h>
#include <string.h>

#include "bench.h"

typedef _Atomic uint64_t lf_word;

#define LF_BIT0 1ull /* algorithm bits: mark (Harris), flag (NM)      */
#define LF_BIT1 2ull /* tag (NM)                                      */
#define LF_BITS (LF_BIT0 | LF_BIT1)
#define LF_PTR 0x0000fffffffffff8ull
#if defined(BENCH_HAND_ADR) && !defined(BENCH_ROBUST)
#define LF_DIRTY 4ull /* written by a CAS, maybe not yet durable        */
#else
#define LF_DIRTY 0ull
#endif
#define LF_VER_ONE (1ull << 48) /* pmdk: the version of a mirrored word */
#define LF_VER (0xffffull << 48)

static inline void *lf_ptr(uint64_t v) {
  return (void *)(uintptr_t)(v & LF_PTR);
}
static inline uint64_t lf_bits(uint64_t v) { return v & LF_BITS; }
static inline uint64_t lf_make(const void *p, uint64_t bits) {
  return (uint64_t)(uintptr_t)p | bits;
}
/* v with `bits` added, as the new value of a CAS (no dirty bit, version). */
static inline uint64_t lf_with(uint64_t v, uint64_t bits) {
  return (v & (LF_PTR | LF_BITS)) | bits;
}

#ifdef BENCH_PMDK
#include <stdio.h>
#include <sys/mman.h>

static ptrdiff_t lf_delta; /* volatile replica - persistent replica */
#define lf_v(p) ((__typeof__(p))((char *)(p) + lf_delta))

/* Map the volatile replica: anonymous DRAM as large as the pool's mapping,
 * touched only where nodes are mirrored. Called by every attach. */
static inline int lf_mirror_map(void) {
  if (lf_delta)
    return 0;
  unsigned long lo, hi, base = (unsigned long)(uintptr_t)bench_pop, end = 0;
  char line[512];
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
        (end ? lo == end : lo <= base && base < hi))
      end = hi; /* the pool's mapping, and any adjoining it */
  fclose(f);
  if (!end)
    return -1;
  void *m = mmap(NULL, end - base, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return -1;
  lf_delta = (char *)m - (char *)bench_pop;
  return 0;
}

/* Copy n bytes of the persistent replica at p into the volatile one. */
static inline void lf_mirror(const void *p, size_t n) {
  memcpy(lf_v((char *)p), p, n);
}
#else
#define lf_v(p) (p)
static inline int lf_mirror_map(void) { return 0; }
static inline void lf_mirror(const void *p, size_t n) { (void)p, (void)n; }
#endif

#if LF_DIRTY
/* v, read from w with LF_DIRTY set: make it durable, then try to clear the
 * bit (whoever changed w since made its own value durable). */
static inline uint64_t lf_settle(lf_word *w, uint64_t v) {
  PM_FLUSH(w, sizeof *w);
  PM_FENCE();
  uint64_t e = v;
  atomic_compare_exchange_strong(w, &e, v & ~LF_DIRTY);
  return v & ~LF_DIRTY;
}
#endif

/* The value of w, durable (hand-adr, pmdk) by the time it is returned. */
static inline uint64_t lf_load(lf_word *w) {
  uint64_t v = atomic_load_explicit(lf_v(w), memory_order_acquire);
#ifdef BENCH_SSAPP
  v = pmkit_ssapp_value(v);
#endif
#if LF_DIRTY
  if (v & LF_DIRTY)
    v = lf_settle(w, v);
#endif
  return v;
}

/* The value a successful lf_cas(w, exp, des) leaves in w, as lf_load
 * would return it: des, plus the next version under pmdk. */
static inline uint64_t lf_written(uint64_t exp, uint64_t des) {
#ifdef BENCH_PMDK
  return des | ((exp + LF_VER_ONE) & LF_VER);
#else
  (void)exp;
  return des;
#endif
}

/* Change w from exp (a value lf_load returned) to des (lf_make); 1 if it
 * did, durably, 0 if w no longer holds exp. */
static inline int lf_cas(lf_word *w, uint64_t exp, uint64_t des) {
#if defined(BENCH_PMDK)
  uint64_t cur = exp, e = exp;
  des = lf_written(exp, des);
  if (atomic_compare_exchange_strong(w, &cur, des)) {
    pmemobj_persist(bench_pop, w, sizeof *w); /* before anyone sees it */
    atomic_compare_exchange_strong(lf_v(w), &e, des);
    return 1;
  }
  /* The persistent word moved on. If the volatile one still shows exp, its
   * writer has not mirrored it yet, and no CAS can follow until someone
   * does: persist the new value and mirror it for the writer. */
  if (atomic_load(lf_v(w)) == exp) {
    pmemobj_persist(bench_pop, w, sizeof *w);
    atomic_compare_exchange_strong(lf_v(w), &e, cur);
  }
  return 0;
#elif LF_DIRTY
  for (;;) {
    uint64_t cur = exp;
    if (atomic_compare_exchange_strong(w, &cur, des | LF_DIRTY)) {
      lf_settle(w, des | LF_DIRTY); /* durable before anyone relies on it */
      return 1;
    }
    if (cur != (exp | LF_DIRTY))
      return 0;
    lf_settle(w, cur); /* exp itself, not yet settled by its writer */
  }
#else
  return atomic_compare_exchange_strong(w, &exp, des);
#endif
}

/* Set bits on w (NM's tag); returns its pointer and bits from then on. */
static inline uint64_t lf_set_bits(lf_word *w, uint64_t bits) {
  for (;;) {
    uint64_t v = lf_load(w);
    if ((v & bits) == bits)
      return v;
    if (lf_cas(w, v, lf_with(v, bits)))
      return v | bits;
  }
}

/* A new node of n bytes, filled in and not yet linked: make it durable and
 * mirror it before the CAS that publishes it. */
static inline void lf_publish(const void *node, size_t n) {
#ifdef BENCH_PMDK
  pmemobj_persist(bench_pop, node, n);
  lf_mirror(node, n);
#else
  PM_PERSIST(node, n);
#endif
}

/* Store v into a word of a node not yet published (or during init). */
static inline void lf_init(lf_word *w, uint64_t v) {
  atomic_store_explicit(w, v, memory_order_relaxed);
}

#endif /* PMKIT_BENCH_LFWORD_H */
