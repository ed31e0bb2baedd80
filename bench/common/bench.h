/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench.h -- what a workload of the benchmark suite is written against, so
 * that one source builds every variant. The build defines one of
 *   BENCH_VOLATILE    DRAM (malloc), no persistence: the upper bound
 *   BENCH_HAND_ADR    pmkit pool, hand-placed flushes and fences (PM_FLUSH,
 *                     PM_FENCE): what the robust mode is measured against
 *   BENCH_HAND_EADR   the same with flushes compiled out (eADR)
 *   BENCH_PMDK        PMDK libpmemobj transactions (PM_TX_ADD)
 * and the macros below compile to what that variant needs and to nothing
 * elsewhere; what the driver does differently lives in the variant's backend
 * (backend.h, one file per variant). Later modes are build flags too:
 * BENCH_ROBUST strips the hand flushes (the robust pass inserts its own),
 * and since every operation is one call of bench_workload->op from the
 * backend's backend_apply, a failure-atomic mode (clobber, ssapp) wraps that
 * call and the counter update in one PMKIT_FASE function in its backend
 * (backend_clobber.c, backend_ssapp.c), without touching the workloads:
 * BENCH_CLOBBER (with BENCH_HAND_ADR or BENCH_HAND_EADR) does, for clobber
 * mode's builds, where PM_UNDO is compiled out and the hand flushes inside
 * operations are removed by the pass (those of the driver's own header
 * stay); BENCH_SSAPP (with BENCH_HAND_EADR) does, for ssapp mode's, where in
 * addition locks are PM locks (pmkit_mutex: recovery holds an interrupted
 * operation's locks again) released at once (a resumed operation never
 * undoes what it wrote, so others may build on it), and the scratch buffer
 * is in the pool.
 *
 * A workload defines a `struct bench_workload` and BENCH_WORKLOAD(it); the
 * driver (driver.c) parses the command line, has the backend create or open
 * the pool, loads the keys, runs the threads over the seeded operation
 * stream, counts completed operations persistently, prints one JSON line,
 * and with `--check POOL` has the backend recover the pool and compares
 * what the workload reports against a replay of the stream. See
 * bench/README.md.
 */
#ifndef PMKIT_BENCH_H
#define PMKIT_BENCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pmkit/annotations.h"
#include "pmkit/pmkit.h"

#if defined(BENCH_SSAPP) && !defined(BENCH_HAND_EADR)
#error "BENCH_SSAPP builds for eADR: define BENCH_HAND_EADR with it"
#endif
#if defined(BENCH_CLOBBER) || defined(BENCH_SSAPP)
#define BENCH_FASE 1 /* every operation is one PMKIT_FASE call */
#endif

#if defined(BENCH_VOLATILE) + defined(BENCH_HAND_ADR) +                        \
        defined(BENCH_HAND_EADR) + defined(BENCH_PMDK) !=                      \
    1
#error                                                                         \
    "define exactly one of BENCH_VOLATILE, BENCH_HAND_ADR, BENCH_HAND_EADR, BENCH_PMDK"
#endif

/* ---- persistence ---------------------------------------------------------
 * PM_FLUSH(p, n): write back [p, p+n) (hand-adr only). PM_FENCE(): order the
 * write-backs before later stores (hand-adr: sfence; hand-eadr: a compiler
 * barrier, as stores still must not be reordered by the compiler). */
#if defined(BENCH_HAND_ADR) && !defined(BENCH_ROBUST)
#define PM_FLUSH(p, n) pmkit_flush((p), (n))
#define PM_FENCE() pmkit_fence()
#elif defined(BENCH_HAND_ADR) || defined(BENCH_HAND_EADR)
#define PM_FLUSH(p, n) ((void)(p), (void)(n))
#define PM_FENCE() atomic_signal_fence(memory_order_seq_cst)
#else
#define PM_FLUSH(p, n) ((void)(p), (void)(n))
#define PM_FENCE() ((void)0)
#endif
#define PM_PERSIST(p, n) (PM_FLUSH((p), (n)), PM_FENCE())

/* ---- transactions (pmdk) ---------------------------------------------------
 * The pmdk backend runs every operation in one transaction (workloads do
 * not begin or end it). Inside, the pmdk variant must snapshot
 * every range of PM it is about to modify with PM_TX_ADD(p, n) -- the
 * other variants ignore it -- and allocates and frees in the transaction. */
#ifdef BENCH_PMDK
#include <libpmemobj.h>
extern PMEMobjpool *bench_pop;
#define PM_TX_ADD(p, n) pmemobj_tx_add_range_direct((p), (n))
#else
#define PM_TX_ADD(p, n) ((void)(p), (void)(n))
#endif

/* ---- several words that change together --------------------------------
 * PM_UNDO(p, n): call before an operation first modifies the PM range
 * [p, p+n) when it changes several words that must change together (node
 * splits, rotations, multi-row transactions). The hand variants save the
 * old bytes in the thread's persistent undo log, durably before it returns;
 * pmdk snapshots the range in the operation's transaction; volatile does
 * nothing. When the operation returns 0 the backend writes back every logged
 * range and commits the operation together with its completed-operation
 * counter; when it returns -1, and after a crash, the logged ranges are
 * rolled back before anything else runs. Do not log memory allocated in the
 * same operation (a rolled-back operation only leaks it). At most
 * BENCH_UNDO_BYTES of log per operation. */
#define BENCH_UNDO_BYTES (256u << 10)
#if defined(BENCH_FASE)
#define PM_UNDO(p, n) ((void)(p), (void)(n))
#elif defined(BENCH_HAND_ADR) || defined(BENCH_HAND_EADR)
void bench_undo(const void *p, size_t n);
#define PM_UNDO(p, n) bench_undo((p), (n))
#else
#define PM_UNDO(p, n) PM_TX_ADD((p), (n))
#endif

/* Allocate n bytes, zeroed, from the variant's heap (malloc, the pmkit pool
 * or the pmdk transaction); NULL when it is exhausted. */
void *pm_alloc(size_t n);
/* Free a block from pm_alloc; inside an operation the free is deferred
 * until the operation has committed. */
void pm_free(void *p);

/* ---- locks ----------------------------------------------------------------
 * DRAM locks (recovery never waits for one), except under ssapp, where they
 * are PM locks in the pool or in static data and are released at once. In
 * the other persistent variants a release inside an operation is deferred
 * until the operation has committed (or rolled back): another thread must
 * not see, and build on, a write that a crash could still roll back after
 * its own commit. So an operation must not take a lock again after
 * releasing it (two-phase locking). */
#ifdef BENCH_SSAPP
typedef pmkit_mutex bench_lock;
#else
typedef pthread_mutex_t bench_lock;
#endif
/* Replace *locks (freed; NULL at first) by an array of n initialised locks,
 * for a workload's attach: in DRAM, or (ssapp) in the pool, the same array
 * in every run. 0 or -1 when out of memory. */
int bench_locks_init(bench_lock **locks, uint64_t n);
/* The same for a workload's own structures holding locks: replace *mem
 * (NULL at first) by `bytes` of 64-aligned memory, which the workload then
 * initialises. 0 or -1. */
int bench_lock_mem(void **mem, size_t bytes);
#ifdef BENCH_SSAPP
#define bench_lock_init(l) (*(l) = (pmkit_mutex){0, 0}, 0)
#define bench_lock_acquire(l) pmkit_mutex_lock(l)
#define bench_lock_release(l) pmkit_mutex_unlock(l)
#else
#define bench_lock_init(l) pthread_mutex_init((l), NULL)
#define bench_lock_acquire(l) pthread_mutex_lock(l)
#ifndef BENCH_VOLATILE
void bench_lock_release(bench_lock *l);
#else
#define bench_lock_release(l) pthread_mutex_unlock(l)
#endif
#endif

/* ---- configuration (set by the driver before load) ---------------------- */
struct bench_config {
  unsigned threads;
  uint64_t keys;     /* key range [0, keys); loaded before the run        */
  uint64_t seed;     /* of the whole stream                               */
  unsigned read_pct; /* share of reads; the rest are updates              */
  size_t value_size; /* bytes of each value (kv workloads), >= 32         */
  double scale;      /* the --scale factor keys and ops were scaled by    */
};
extern const struct bench_config *bench_cfg;

/* ---- the operation stream: a pure function of (seed, thread, index) ----- */
enum { BENCH_READ, BENCH_UPDATE, BENCH_INSERT, BENCH_DELETE };
struct bench_op {
  int kind;       /* BENCH_*                                              */
  uint64_t key;   /* uniform in [0, keys)                                 */
  uint64_t stamp; /* identifies this write: (thread + 1) << 48 | index    */
  uint64_t rnd;   /* more random bits for the workload's own choices      */
};
/* Operation i of thread t. Key-value workloads see READ and UPDATE (and
 * INSERT while loading); set workloads (bench_workload.set) see READ,
 * INSERT and DELETE (half each of the non-read share). */
struct bench_op bench_op_at(unsigned t, uint64_t i);
/* The stamp of the value the load phase gives key k (thread "0"). */
static inline uint64_t bench_load_stamp(uint64_t key) { return key; }
uint64_t bench_mix64(uint64_t z);

/* ---- values: self-describing, so the checker can validate every byte ---- */
struct bench_value_hdr {
  uint64_t key, stamp, size, sum;
};
/* A fresh block from pm_alloc holding the value `stamp` writes for `key`
 * (value_size bytes, built in scratch first), written back but not fenced
 * (hand-adr): the caller fences before it publishes the block. NULL when
 * the heap is exhausted. */
void *bench_new_value(uint64_t key, uint64_t stamp, void *scratch);
/* Fill buf (size bytes, >= 32) with the value `stamp` writes for `key`. */
void bench_make_value(void *buf, size_t size, uint64_t key, uint64_t stamp);
/* 0 if buf holds a well-formed value of `size` bytes for `key`, with its
 * stamp in *stamp; -1 if torn or foreign. */
int bench_value_check(const void *buf, size_t size, uint64_t key,
                      uint64_t *stamp);

/* ---- the checker's side ----------------------------------------------------
 * A workload's check walks its structure after recovery, verifies its own
 * invariants (bench_fail() on the first broken one) and reports every key
 * it holds with bench_found(); the driver compares the reports with the
 * replay of the operation stream. */
struct bench_check;
/* Report that key is present holding the value written by `stamp` (for a
 * set workload: the stamp of the insert, or bench_load_stamp). Returns -1
 * (after recording why) if the key was reported before. */
int bench_found(struct bench_check *c, uint64_t key, uint64_t stamp);
/* A key-value workload's entry: val must be a well-formed value of key
 * (bench_make_value), else the pool is inconsistent; then the key is
 * reported with the value's stamp. 0, or -1 after recording why. */
int bench_found_value(struct bench_check *c, uint64_t key, const void *val);
/* Operations 0..bench_done(t)-1 of thread t completed durably (in check). */
uint64_t bench_done(unsigned t);
/* Record why the pool is inconsistent; returns -1. */
int bench_fail(struct bench_check *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- the workload --------------------------------------------------------
 * The driver calls init once on a fresh pool, then loads the keys by
 * calling op with BENCH_INSERT for keys 0..keys-1 (a set: the even keys),
 * stamp bench_load_stamp(key), one operation at a time like the run does,
 * so the load is crash-consistent and resumable too. After a crash the
 * driver may repeat the last insert of the load: an INSERT of a key that is
 * present must act as an UPDATE with the op's stamp. */
struct bench_workload {
  const char *name;
  size_t root_size; /* bytes of its persistent root, zeroed at creation   */
  int set;          /* 1: a set (INSERT/DELETE/READ), 0: key-value        */
  /* 1: the pmdk variant does not run operations in transactions (the
   * lock-free workloads persist Mirror-style instead); pm_alloc/pm_free
   * then use PMDK's atomic allocator. */
  int notx;
  /* 1: check compares with the stream itself (transactional workloads,
   * using bench_op_at and bench_done); the driver's key replay is skipped
   * and bench_found is not used. */
  int own_compare;
  /* The name of every operation of the run in trace marks, and so in the
   * explorer's reports (a transactional workload's transaction); NULL:
   * the operation's kind (read, update, ...). Load inserts are "insert". */
  const char *op_name;
  /* Default share of reads when --read-pct is not given (0: 50). */
  unsigned read_pct;
  /* Build the empty structure in the zeroed root (inside a transaction
   * under pmdk). 0 or -1. */
  int (*init)(void *root);
  /* Prepare volatile state (locks, caches) for the root, before init on a
   * fresh pool and after a reopen. 0 or -1. */
  int (*attach)(void *root);
  /* One operation, made durable before it returns (hand variants) or
   * inside the driver's transaction (pmdk). scratch holds value_size
   * bytes owned by the thread. 0, or -1 on failure (the driver stops). */
  int (*op)(void *root, unsigned tid, const struct bench_op *op, void *scratch);
  /* After recovery: verify the invariants, then bench_found() per key. */
  int (*check)(void *root, struct bench_check *c);
};
#define BENCH_WORKLOAD(w) const struct bench_workload *bench_workload = &(w)
extern const struct bench_workload *bench_workload;

#endif /* PMKIT_BENCH_H */
