/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.h -- what the benchmark driver (driver.c) asks of a variant: the
 * pool or heap, the run's recovery, how one operation is made durable, and
 * what --check and the JSON line add. The driver keeps what every variant
 * shares (the command line, the load, the threads, the seeded stream, the
 * JSON line, --check's replay); everything that differs by variant is here.
 *
 * One backend per variant, chosen when the binary is linked: it defines
 * the table of entries the driver calls at set-up, recovery and --check
 * (bench_backend), and the per-operation functions (backend_apply and
 * bench.h's pm_alloc, pm_free, and bench_lock_release and bench_undo where
 * bench.h declares them as functions), which are called directly, never
 * through the table. bench/common/CMakeLists.txt links each variant with
 * its backend's files (bench_backend, PMKIT_BENCH_BACKEND_<mode>):
 *   backend_volatile.c  volatile                     malloc, nothing persists
 *   backend_pmkit.c     hand-adr, hand-eadr, robust  the undo log (PM_UNDO)
 *   backend_pmdk.c      pmdk                         libpmemobj transactions
 *   backend_clobber.c   clobber-*, undo-*            one FASE, re-executed
 *   backend_ssapp.c     ssapp*                       one FASE, resumed
 * and two files the backends share: pool.c, the pmkit pool (set-up, alloc,
 * the checks of the pool) for pmkit, clobber and ssapp; defer.c (defer.h),
 * DRAM locks whose release inside an operation waits for its commit, for
 * pmkit, pmdk and clobber. A new mode writes backend_<mode>.c, usually with
 * pool.c, and registers it there. Entry points: struct bench_backend,
 * backend_apply, and pool.c's bench_pool_* for the backends on it.
 */
#ifndef PMKIT_BENCH_BACKEND_H
#define PMKIT_BENCH_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"

#define BENCH_MAX_THREADS 64u
#define BENCH_HDR_MAGIC 0x3148434e45424d50ull /* "PMBENCH1" */

struct undo_log; /* a thread's undo log: backend_pmkit.c */

/* The persistent run header at the start of the pool's root, followed
 * (64-byte aligned) by the workload's root. The driver owns the
 * configuration and the counters; the fields marked for a backend are its
 * own. Each thread's counter has a line of its own. */
struct run_hdr {
  uint64_t magic;     /* BENCH_HDR_MAGIC once the workload's init is durable */
  uint64_t loaded;    /* the load phase finished                        */
  uint64_t load_next; /* keys below this are loaded                     */
  uint64_t keys, seed, read_pct, value_size, threads, root_size;
  char workload[64];
  /* ssapp: the workload's lock arrays (bench_locks_init), in call order. */
  struct {
    void *mem;
    uint64_t bytes;
  } lockarr[3];
  struct {
    uint64_t done;         /* operations 0..done-1 of the stream are durable */
    struct undo_log *undo; /* the thread's undo log (hand variants)  */
    void *scratch;         /* ssapp: the thread's scratch buffer, in PM */
    char pad[40];
  } slot[BENCH_MAX_THREADS] __attribute__((aligned(64)));
};
_Static_assert(offsetof(struct run_hdr, slot) == 192,
               "bench/crashtest.py finds slot[0].done at this offset");

/* The run header of the open pool (the backend's open sets it), and the
 * workload's root behind it. */
extern struct run_hdr *bench_hdr;
static inline void *bench_root(void) {
  return (char *)bench_hdr + sizeof(struct run_hdr);
}

/* Print "bench_NAME: " and the message on stderr, and exit with status 2. */
_Noreturn void bench_die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* ---- the entries called a few times a run ---------------------------------
 * A backend defines `const struct bench_backend bench_backend = {...}`
 * with designated initializers; an entry it leaves out (NULL) does what its
 * comment says instead. None of these runs per operation: those are the
 * functions further down, resolved when the binary is linked. */
struct bench_backend {
  /* The variant's name, as --info and the JSON line give it. */
  const char *variant;
  /* 1 if the variant keeps a pool file; 0 (volatile): the run's memory is
   * gone with the process, and --check and --load-only are refused. */
  int persistent;
  /* After the command line is parsed, before anything else (pmdk
   * re-executes the program here so that its pool maps at a fixed
   * address). Returns only if the run is to go on. NULL: nothing. */
  void (*start)(char **argv);
  /* Create (create = 1, `mib` MiB) or open the pool at `path`, and point
   * bench_hdr at a root of `size` bytes in it (zeroed when new); volatile:
   * `size` zeroed bytes of DRAM. 0, or -1 with the reason in why. */
  int (*open)(const char *path, int create, size_t size, uint64_t mib,
              char *why, size_t wn);
  /* Close what open opened; bench_hdr is NULL afterwards. */
  void (*close)(void);
  /* One failure-atomic step of the set-up outside the operations (the run
   * header's fields, the workload's init): fn(arg), whose writes to
   * [snap, snap + n) (n may be 0) and whose allocations a crash keeps all
   * or none of (pmdk: one transaction that snapshots the range first).
   * fn's result, or -1 if the step aborted. NULL: fn(arg) alone, which
   * makes each of its writes durable itself (PM_PERSIST) in an order that
   * is safe at every point. */
  int (*atomically)(int (*fn)(void *arg), void *arg, void *snap, size_t n);
  /* Right after open, before the driver reads the run header: undo what
   * the operations a crash cut off left half done (the hand variants roll
   * back their undo logs). 0, or -1 with the reason in why (the pool is
   * then inconsistent). NULL: nothing to undo. */
  int (*rollback)(char *why, size_t wn);
  /* Before each call of the workload's attach (ssapp counts the lock
   * arrays the attach asks for afresh). NULL: nothing. */
  void (*attach)(void);
  /* Called after the workload's attach, on a pool whose set-up was
   * complete: finish the operations a crash interrupted by running the
   * workload's code again (clobber re-executes them, ssapp resumes them),
   * which takes the workload's locks, so --check attaches the workload
   * before it as the run does. 0, or -1 with the reason in why. NULL:
   * nothing is left to finish. */
  int (*resume)(char *why, size_t wn);
  /* bench_lock_mem (bench.h) for the workload's locks. NULL: DRAM. */
  int (*lock_mem)(void **mem, size_t bytes);
  /* Thread t's scratch buffer of value_size bytes for the workload's op,
   * owned by the backend (ssapp: in the pool, the same buffer in every
   * run); NULL if there is no room. NULL: one in DRAM that the driver
   * allocates and frees. */
  void *(*scratch)(unsigned t);
  /* Take the counters of the mode's runtime at one edge of the timed
   * window (edge 0, its start, may be taken again after the warm-up; edge
   * 1, its end), and give the JSON line's fields they make, each as
   * `, "name": value`, into buf (left empty when there are none). NULL:
   * no fields of the mode's own. */
  void (*sample)(int edge);
  void (*json_fields)(char *buf, size_t n);
  /* --check: the pool's own metadata is consistent. 0, or -1 with the
   * reason in why. NULL: nothing to check. */
  int (*check_pool)(char *why, size_t wn);
  /* --check: 1 if the value at p lies in a live block of at least n
   * bytes, 0 if its block is free. NULL: the heap cannot tell. */
  int (*block_ok)(const void *p, size_t n);
  /* --check: what resume did, appended to the "consistent" line, as
   * "; recovery re-executed ...". NULL: nothing. */
  void (*recovery_note)(char *buf, size_t n);
};
extern const struct bench_backend bench_backend;

/* ---- per operation: functions, so that the driver's calls are direct ----
 * Besides bench.h's pm_alloc and pm_free, and bench_lock_release and
 * bench_undo where bench.h declares them as functions. */

/* Run one operation of thread t (bench_workload->op) and, once it is
 * durable, set *done = next (the thread's counter or the load cursor), so
 * that after a crash either both happened or neither did (or, with one
 * operation in flight, --check's replay allows for it). This is where each
 * variant differs: the undo log's commit (pmkit), a transaction (pmdk), a
 * PMKIT_FASE function holding the operation and the counter update, which
 * the mode's pass instruments (clobber, ssapp). Lock releases and frees
 * the operation deferred happen here, after it committed. The workload's
 * result: 0, or -1 (the driver stops; under a FASE the backend stops the
 * program itself, as the operation's partial work is committed). */
int backend_apply(const struct bench_op *op, unsigned t, uint64_t *done,
                  uint64_t next, void *scratch);

/* ---- the pmkit pool (pool.c), for the backends built on it ---------------
 * bench_backend's open, close, check_pool and block_ok (BENCH_POOL_ENTRIES
 * in its initializer), and bench.h's pm_alloc; each backend frees
 * (pm_free) in its own way. */
extern pmkit_pool *bench_pool;
int bench_pool_open(const char *path, int create, size_t size, uint64_t mib,
                    char *why, size_t wn);
void bench_pool_close(void);
int bench_pool_check(char *why, size_t wn);
int bench_pool_block_ok(const void *p, size_t n);
#define BENCH_POOL_ENTRIES                                                     \
  .persistent = 1, .open = bench_pool_open, .close = bench_pool_close,         \
  .check_pool = bench_pool_check, .block_ok = bench_pool_block_ok

#endif /* PMKIT_BENCH_BACKEND_H */
