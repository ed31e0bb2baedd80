/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver.c -- main() of every benchmark workload (bench.h). It owns the
 * pool (a pmkit pool for the hand variants, a PMDK pool for pmdk, malloc
 * for volatile), the persistent run header (configuration, per-thread
 * completed-operation counters), the threads, the timing and the JSON line
 * bench/run.py reads; and `--check POOL`, which recovers a pool left by a
 * crash and compares what the workload reports against a replay of the
 * seeded operation stream. Usage: see usage_text below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#if defined(BENCH_VARIANT_NAME)
#define VARIANT BENCH_VARIANT_NAME
#elif defined(BENCH_VOLATILE)
#define VARIANT "volatile"
#elif defined(BENCH_HAND_ADR) && defined(BENCH_ROBUST)
#define VARIANT "robust"
#elif defined(BENCH_HAND_ADR)
#define VARIANT "hand-adr"
#elif defined(BENCH_HAND_EADR)
#define VARIANT "hand-eadr"
#else
#define VARIANT "pmdk"
#endif

#define MAX_THREADS 64u
#define HDR_MAGIC 0x3148434e45424d50ull /* "PMBENCH1" */
#define GOLDEN 0x9e3779b97f4a7c15ull
#define STAMP_SHIFT 48

/* A thread's undo log (PM_UNDO): entries of {address, length, old bytes
 * padded to 8}, valid up to `used`. An entry is durable before `used`
 * grows over it, so a torn entry is never rolled back; `used` returns to 0
 * (one 8-byte store) when the operation commits or has been rolled back. */
struct undo_ent {
  uint64_t addr, len;
};
struct undo_log {
  uint64_t used;
  char pad[56];
  /* the operation's bytes, then the counter's entry at commit */
  unsigned char data[BENCH_UNDO_BYTES + sizeof(struct undo_ent) + 8];
};

/* The persistent run header, followed (64-byte aligned) by the workload's
 * root. Each thread's counter has a line of its own. */
struct run_hdr {
  uint64_t magic;
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
  } slot[MAX_THREADS] __attribute__((aligned(64)));
};
#define WROOT(h) ((void *)((char *)(h) + sizeof(struct run_hdr)))
_Static_assert(offsetof(struct run_hdr, slot) == 192,
               "bench/crashtest.py finds slot[0].done at this offset");

static struct bench_config cfg = {1, 100000, 1, 50, 256, 1.0};
const struct bench_config *bench_cfg = &cfg;
static struct run_hdr *hdr;
#if defined(BENCH_HAND_ADR) || defined(BENCH_HAND_EADR)
static pmkit_pool *pool;
#endif
#ifdef BENCH_PMDK
PMEMobjpool *bench_pop;
#endif

static struct {
  uint64_t ops; /* 0: timed */
  double seconds, warmup;
  const char *pool, *pool_dir, *check;
  uint64_t pool_mib;
  int keep, info, load_only;
} opt = {0, 1.0, 0.2, NULL, NULL, NULL, 0, 0, 0, 0};

static _Noreturn void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bench_%s: ", bench_workload->name);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the stream and the values ------------------------------------------ */

uint64_t bench_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct bench_op bench_op_at(unsigned t, uint64_t i) {
  uint64_t base = bench_mix64(cfg.seed ^ (0x6a09e667f3bcc909ull * (t + 1)));
  uint64_t h = bench_mix64(base + (i + 1) * GOLDEN);
  struct bench_op op;
  unsigned pct = (unsigned)((uint32_t)h % 100);
  op.key = (uint64_t)(((unsigned __int128)(h >> 32) * cfg.keys) >> 32);
  op.stamp = (uint64_t)(t + 1) << STAMP_SHIFT | i;
  op.rnd = bench_mix64(h ^ GOLDEN);
  if (pct < cfg.read_pct)
    op.kind = BENCH_READ;
  else if (!bench_workload->set)
    op.kind = BENCH_UPDATE;
  else
    op.kind = (op.rnd & 1) ? BENCH_INSERT : BENCH_DELETE;
  return op;
}

static uint64_t value_sum(const uint64_t *w, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size / 8; i++) {
    h ^= i == 3 ? 0 : w[i]; /* word 3 is the sum itself */
    h *= 0x100000001b3ull;
  }
  return bench_mix64(h);
}

void bench_make_value(void *buf, size_t size, uint64_t key, uint64_t stamp) {
  uint64_t *w = buf;
  uint64_t x = bench_mix64(cfg.seed ^ bench_mix64(key) ^ stamp * GOLDEN);
  w[0] = key;
  w[1] = stamp;
  w[2] = size;
  w[3] = 0;
  for (size_t j = 4; j < size / 8; j++)
    w[j] = x ^ (j * GOLDEN);
  w[3] = value_sum(w, size);
}

void *bench_new_value(uint64_t key, uint64_t stamp, void *scratch) {
  bench_make_value(scratch, cfg.value_size, key, stamp);
  void *v = pm_alloc(cfg.value_size);
  if (!v)
    return NULL;
  memcpy(v, scratch, cfg.value_size);
  PM_FLUSH(v, cfg.value_size);
  return v;
}

int bench_value_check(const void *buf, size_t size, uint64_t key,
                      uint64_t *stamp) {
  const uint64_t *w = buf;
  if (size < 32 || w[0] != key || w[2] != size || w[3] != value_sum(w, size))
    return -1;
  uint64_t x = bench_mix64(cfg.seed ^ bench_mix64(key) ^ w[1] * GOLDEN);
  for (size_t j = 4; j < size / 8; j++)
    if (w[j] != (x ^ (j * GOLDEN)))
      return -1;
  *stamp = w[1];
  return 0;
}

/* ---- what an operation defers to its end ----------------------------------
 * Lock releases (two-phase locking, bench.h) and, in the hand variants,
 * frees: a block freed by an operation that is then rolled back is still
 * referenced. */
#if !defined(BENCH_VOLATILE)
#define MAX_HELD 64
#define MAX_FREES 1024
static __thread struct {
  int in_op;
  unsigned t; /* the thread slot whose log the operation uses */
  unsigned nheld, nfrees;
  bench_lock *held[MAX_HELD];
  void *frees[MAX_FREES];
} cur;

#ifndef BENCH_SSAPP
void bench_lock_release(bench_lock *l) {
  if (!cur.in_op) {
    pthread_mutex_unlock(l);
    return;
  }
  if (cur.nheld == MAX_HELD)
    die("an operation released more than %u locks", MAX_HELD);
  cur.held[cur.nheld++] = l;
}

#endif

static void op_end(void) {
  cur.in_op = 0;
#ifndef BENCH_SSAPP
  while (cur.nheld)
    pthread_mutex_unlock(cur.held[--cur.nheld]);
#endif
  while (cur.nfrees)
    pm_free(cur.frees[--cur.nfrees]);
}
#endif

#ifdef BENCH_SSAPP
/* The k-th call of a run gets the k-th block of the pool, allocated on the
 * first run: an interrupted operation's locks are where recovery looks for
 * them (zeroed memory is a free lock; a crashed run's are reset). */
static unsigned lock_mem_calls; /* in this attach */

int bench_lock_mem(void **mem, size_t bytes) {
  unsigned k = lock_mem_calls++;
  if (k >= sizeof hdr->lockarr / sizeof hdr->lockarr[0])
    die("more lock arrays than the run header has room for");
  if (!hdr->lockarr[k].mem || hdr->lockarr[k].bytes != bytes) {
    void *a;
    if (pmkit_zalloc(pool, bytes + 48, &a)) /* 16-aligned: round up to 64 */
      return -1;
    hdr->lockarr[k].bytes = bytes;
    /* a crash before this leaks the block */
    hdr->lockarr[k].mem = (void *)(((uintptr_t)a + 63) & ~(uintptr_t)63);
  }
  *mem = hdr->lockarr[k].mem;
  return 0;
}
#else
int bench_lock_mem(void **mem, size_t bytes) {
  free(*mem);
  *mem = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  return *mem ? 0 : -1;
}
#endif

/* The workload's attach (0 or -1); ssapp: lock arrays counted afresh. */
static int attach_workload(void) {
#ifdef BENCH_SSAPP
  lock_mem_calls = 0;
#endif
  return bench_workload->attach ? bench_workload->attach(WROOT(hdr)) : 0;
}

int bench_locks_init(bench_lock **locks, uint64_t n) {
  void *mem = *locks;
  if (bench_lock_mem(&mem, n * sizeof **locks))
    return -1;
  *locks = mem;
  for (uint64_t i = 0; i < n; i++)
    bench_lock_init(&(*locks)[i]);
  return 0;
}

/* ---- memory ------------------------------------------------------------- */

void *pm_alloc(size_t n) {
#if defined(BENCH_VOLATILE)
  return calloc(1, n);
#elif defined(BENCH_PMDK)
  PMEMoid o = OID_NULL;
  if (pmemobj_tx_stage() == TX_STAGE_WORK)
    o = pmemobj_tx_zalloc(n, 1);
  else if (pmemobj_zalloc(bench_pop, &o, n, 1))
    return NULL;
  return OID_IS_NULL(o) ? NULL : pmemobj_direct(o);
#else
  void *p;
  if (pmkit_zalloc(pool, n, &p))
    return NULL;
  return p;
#endif
}

void pm_free(void *p) {
  if (!p)
    return;
#if defined(BENCH_VOLATILE)
  free(p);
#elif defined(BENCH_PMDK)
  PMEMoid o = pmemobj_oid(p);
  if (pmemobj_tx_stage() == TX_STAGE_WORK)
    pmemobj_tx_free(o);
  else
    pmemobj_free(&o);
#else
#ifndef BENCH_FASE /* a FASE's frees: the runtime applies them at commit */
  if (cur.in_op) {
    if (cur.nfrees == MAX_FREES)
      die("an operation freed more than %u blocks", MAX_FREES);
    cur.frees[cur.nfrees++] = p;
    return;
  }
#endif
  pmkit_free(pool, p);
#endif
}

/* ---- the pool ------------------------------------------------------------ */

#ifdef BENCH_PMDK
/* PMDK maps a pool wherever the kernel likes; the workloads keep raw
 * pointers, so every run maps it at one address through libpmem's
 * PMEM_MMAP_HINT, which it reads at start-up: re-execute with it set. */
#define PMDK_HINT "0x100000000000"
static void pmdk_fix_address(char **argv) {
  const char *h = getenv("PMEM_MMAP_HINT");
  if (h && !strcmp(h, PMDK_HINT))
    return;
  setenv("PMEM_MMAP_HINT", PMDK_HINT, 1);
  setenv("PMEM_IS_PMEM_FORCE", "1", 0);
  execv("/proc/self/exe", argv);
  die("cannot re-execute with PMEM_MMAP_HINT: %s", strerror(errno));
}
#define LAYOUT "pmkit-bench"
#endif

static size_t hdr_total(void) {
  return sizeof(struct run_hdr) + ((bench_workload->root_size + 63) & ~63ul);
}

/* Create (create = 1) or open the run's pool and set hdr. */
static int pool_setup(const char *path, int create, char *why, size_t wn) {
  size_t size = hdr_total();
#if defined(BENCH_VOLATILE)
  (void)path;
  (void)create;
  hdr = aligned_alloc(64, (size + 63) & ~63ul);
  if (!hdr)
    return snprintf(why, wn, "out of memory"), -1;
  memset(hdr, 0, size);
  return 0;
#elif defined(BENCH_PMDK)
  uint64_t mib = opt.pool_mib ? opt.pool_mib : 64;
  if (create) {
    /* Created under a temporary name and renamed when complete (as pmkit
     * pools are), so a crash during creation never leaves a half-made pool
     * under the run's name. */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.creating", path);
    unlink(tmp);
    bench_pop = pmemobj_create(tmp, LAYOUT, mib << 20, 0644);
    if (bench_pop && rename(tmp, path)) {
      snprintf(why, wn, "%s: cannot rename into place: %s", tmp,
               strerror(errno));
      pmemobj_close(bench_pop);
      unlink(tmp);
      return -1;
    }
  } else {
    bench_pop = pmemobj_open(path, LAYOUT);
  }
  if (!bench_pop)
    return snprintf(why, wn, "%s: %s", path, pmemobj_errormsg()), -1;
  PMEMoid r = pmemobj_root(bench_pop, size);
  if (OID_IS_NULL(r))
    return snprintf(why, wn, "root: %s", pmemobj_errormsg()), -1;
  hdr = pmemobj_direct(r);
  return 0;
#else
  uint64_t mib = opt.pool_mib ? opt.pool_mib : 64;
  pmkit_pool_opts o = {.layout = "pmkit-bench"};
  int err = create ? pmkit_pool_create(path, mib << 20, &o, &pool)
                   : pmkit_pool_open(path, &o, &pool);
  if (!err && (err = pmkit_root(pool, size, (void **)&hdr)))
    pmkit_pool_close(pool);
  if (err)
    return snprintf(why, wn, "%s: %s", pmkit_strerror(err), pmkit_errormsg()),
           -1;
  return 0;
#endif
}

static void pool_teardown(void) {
#if defined(BENCH_VOLATILE)
  free(hdr);
#elif defined(BENCH_PMDK)
  pmemobj_close(bench_pop);
#else
  pmkit_pool_close(pool);
#endif
  hdr = NULL;
}

/* Persist a header word the driver owns. */
static void hdr_store(uint64_t *w, uint64_t v) {
#ifdef BENCH_PMDK
  TX_BEGIN(bench_pop) {
    pmemobj_tx_add_range_direct(w, sizeof *w);
    *w = v;
  }
  TX_END
#else
  *w = v;
  PM_PERSIST(w, sizeof *w);
#endif
}

/* ---- the undo log (hand variants) ---------------------------------------- */
#if defined(BENCH_HAND_ADR) || defined(BENCH_HAND_EADR)
static size_t ent_size(uint64_t len) {
  return sizeof(struct undo_ent) + ((len + 7) & ~(uint64_t)7);
}

static struct undo_log *undo_log_of(unsigned t) {
  struct undo_log *l = hdr->slot[t].undo;
  if (l)
    return l;
  if (pmkit_alloc(pool, sizeof *l, (void **)&l))
    die("no room for thread %u's undo log: %s", t, pmkit_errormsg());
  l->used = 0;
  PM_PERSIST(&l->used, sizeof l->used);
  hdr->slot[t].undo = l; /* a crash before this leaks the block */
  PM_PERSIST(&hdr->slot[t].undo, sizeof hdr->slot[t].undo);
  return l;
}

static void undo_append(struct undo_log *l, const void *p, size_t n) {
  size_t need = ent_size(n);
  struct undo_ent *e = (struct undo_ent *)(l->data + l->used);
  e->addr = (uintptr_t)p;
  e->len = n;
  memcpy(e + 1, p, n);
  PM_PERSIST(e, need); /* the entry, then the length that admits it */
  l->used += need;
  PM_PERSIST(&l->used, sizeof l->used);
}

void bench_undo(const void *p, size_t n) {
  if (!cur.in_op)
    die("PM_UNDO outside an operation");
  if (!n)
    return;
  struct undo_log *l = undo_log_of(cur.t);
  if (l->used + ent_size(n) > BENCH_UNDO_BYTES)
    die("an operation logged more than %u bytes (BENCH_UNDO_BYTES)",
        BENCH_UNDO_BYTES);
  undo_append(l, p, n);
}

/* Walk the entries of l; NULL if one is malformed. */
static struct undo_ent *undo_next(struct undo_log *l, uint64_t *at) {
  if (*at >= l->used)
    return NULL;
  struct undo_ent *e = (struct undo_ent *)(l->data + *at);
  if (!e->len || e->len > BENCH_UNDO_BYTES ||
      *at + ent_size(e->len) > l->used ||
      !pmkit_in_pool((void *)(uintptr_t)e->addr) ||
      !pmkit_in_pool((char *)(uintptr_t)e->addr + e->len - 1))
    return NULL;
  *at += ent_size(e->len);
  return e;
}

/* Restore the old bytes, newest entry first (a range logged twice ends
 * with its oldest bytes); a crash midway rolls back again. 0 or -1 if the
 * log is malformed (it is then left alone). */
static int undo_rollback(struct undo_log *l) {
  struct undo_ent **ents = malloc(sizeof l->data / 16 * sizeof *ents);
  unsigned n = 0;
  uint64_t at = 0;
  if (!ents)
    die("out of memory for a rollback");
  for (struct undo_ent *e; (e = undo_next(l, &at));)
    ents[n++] = e;
  if (at != l->used || l->used > sizeof l->data) {
    free(ents);
    return -1;
  }
  while (n--) {
    void *dst = (void *)(uintptr_t)ents[n]->addr;
    memcpy(dst, ents[n] + 1, ents[n]->len);
    PM_FLUSH(dst, ents[n]->len);
  }
  free(ents);
  PM_FENCE();
  l->used = 0;
  PM_PERSIST(&l->used, sizeof l->used);
  return 0;
}

/* Write back what the operation logged, then commit it with its counter:
 * the counter is logged too, so the one store that empties the log
 * commits both. */
static void undo_commit(struct undo_log *l, uint64_t *done, uint64_t next) {
  undo_append(l, done, sizeof *done);
  *done = next;
  uint64_t at = 0;
  for (struct undo_ent *e; (e = undo_next(l, &at));)
    PM_FLUSH((void *)(uintptr_t)e->addr, e->len);
  PM_FENCE();
  l->used = 0;
  PM_PERSIST(&l->used, sizeof l->used);
}

/* Recovery: roll back every thread's uncommitted operation. */
static int undo_recover(char *why, size_t wn) {
  for (unsigned t = 0; t < MAX_THREADS; t++) {
    struct undo_log *l = hdr->slot[t].undo;
    if (!l || !l->used)
      continue;
    if (!pmkit_in_pool(l) || !pmkit_in_pool((char *)(l + 1) - 1) ||
        undo_rollback(l))
      return snprintf(why, wn, "thread %u's undo log is malformed", t), -1;
  }
  return 0;
}
#else
static int undo_recover(char *why, size_t wn) {
  (void)why;
  (void)wn;
  return 0;
}
#endif

/* ---- the run ----------------------------------------------------------- */

static atomic_int start_flag, stop_flag;
struct worker {
  pthread_t tid;
  unsigned id;
  uint64_t target; /* --ops: run operations [done, target) */
  _Atomic uint64_t ops;
  int failed;
  void *scratch;
};
static struct worker workers[MAX_THREADS];
static const char *const kind_name[] = {"read", "update", "insert", "delete"};

#ifdef BENCH_CLOBBER
/* Set while recovery re-executes operations, one after the other on this
 * thread: each releases its locks as it ends (no other thread runs). */
static int clobber_recovering;

/* Clobber mode: the operation and its counter form one FASE; recovery
 * re-executes it with these arguments (scratch: its length only). The
 * counter is only written, and nothing else the operation touches is it
 * (restrict), so its write is no clobber write. */
PMKIT_FASE PMKIT_FASE_SCRATCH(7, 8) static int op_fase(
    void *root, unsigned t, uint64_t kind, uint64_t key, uint64_t stamp,
    uint64_t rnd, void *scratch, uint64_t scratch_len, uint64_t *restrict done,
    uint64_t next) {
  (void)scratch_len;
  struct bench_op op = {(int)kind, key, stamp, rnd};
  cur.in_op = 1;
  cur.t = t;
  int err = bench_workload->op(root, t, &op, scratch);
  if (!err)
    *done = next;
  if (clobber_recovering)
    op_end(); /* the next interrupted operation may need the same locks */
  return err;
}

/* FASEs the last recovery re-executed, and rolled back (undo setting). */
static unsigned clobber_reexecuted, clobber_rolled_back;

/* Finish FASEs a crash interrupted (after attach: they take its locks).
 * Every operation whose FASE had begun must be complete afterwards, its
 * counter at the value the call was to store (the undo setting rolls it
 * back instead: the checks that follow see it as never begun). */
static int clobber_recover(char *why, size_t wn) {
  if (hdr->magic != HDR_MAGIC)
    return 0; /* no operation runs before the set-up is complete */
  struct {
    uint64_t *done, next;
  } begun[PMKIT_MAX_THREADS];
  unsigned nbegun = 0, nundo = 0;
  for (unsigned s = 0; s < PMKIT_MAX_THREADS; s++) {
    pmkit_clobber_inflight f;
    int r = pmkit_clobber_inflight_get(pool, s, &f);
    if (r < 0)
      return snprintf(why, wn, "slot %u: %s", s, pmkit_errormsg()), -1;
    if (r == 0)
      continue;
    if (f.undo) {
      nundo++;
      continue;
    }
    if (!f.name || strcmp(f.name, "op_fase") || f.nargs != 10)
      return snprintf(why, wn, "slot %u: an unknown FASE in flight", s), -1;
    begun[nbegun].done = (uint64_t *)(uintptr_t)f.args[8];
    begun[nbegun++].next = f.args[9];
  }
  clobber_recovering = 1;
  int n = pmkit_recover(pool);
  clobber_recovering = 0;
  if (n < 0)
    return snprintf(why, wn, "recovery failed: %s", pmkit_errormsg()), -1;
  if ((unsigned)n != nbegun + nundo)
    return snprintf(why, wn, "recovery handled %d FASEs, %u were in flight", n,
                    nbegun + nundo),
           -1;
  for (unsigned i = 0; i < nbegun; i++)
    if (*begun[i].done != begun[i].next)
      return snprintf(why, wn,
                      "the interrupted operation %" PRIu64
                      " began but recovery did not complete it (its "
                      "counter is %" PRIu64 ")",
                      begun[i].next - 1, *begun[i].done),
             -1;
  clobber_reexecuted = nbegun;
  clobber_rolled_back = nundo;
  return 0;
}
#endif

#ifdef BENCH_SSAPP
/* SSAPP mode: the operation and its counter form one FASE, which recovery
 * resumes where a crash interrupted it. scratch is the thread's buffer in
 * the pool (a resumed operation may copy from what it built there). */
PMKIT_FASE static int op_fase(void *root, unsigned t, uint64_t kind,
                              uint64_t key, uint64_t stamp, uint64_t rnd,
                              void *scratch, uint64_t *done, uint64_t next) {
  struct bench_op op = {(int)kind, key, stamp, rnd};
  int err = bench_workload->op(root, t, &op, scratch);
  if (!err)
    *done = next;
  return err;
}

/* FASEs the last recovery resumed. */
static int ssapp_resumed;

/* Finish the operations a crash interrupted (after attach: they take its
 * locks). */
static int ssapp_recover(char *why, size_t wn) {
  if (hdr->magic != HDR_MAGIC)
    return 0; /* no operation runs before the set-up is complete */
  int n = pmkit_recover(pool);
  if (n < 0)
    return snprintf(why, wn, "recovery failed: %s", pmkit_errormsg()), -1;
  ssapp_resumed = n;
  return 0;
}

/* The thread's scratch buffer in the pool, allocated on its first run. */
static void *ssapp_scratch(unsigned t) {
  if (!hdr->slot[t].scratch) {
    void *b;
    if (pmkit_zalloc(pool, cfg.value_size, &b))
      die("no room for thread %u's scratch buffer", t);
    hdr->slot[t].scratch = b;
  }
  return hdr->slot[t].scratch;
}
#endif

/* One operation, failure-atomic under pmdk; *done = next once durable. */
static int apply(const struct bench_op *opp, unsigned t, uint64_t *done,
                 uint64_t next, void *scratch) {
  struct bench_op op = *opp;
  void *root = WROOT(hdr);
  int err = 0;
  const char *name = bench_workload->op_name && op.stamp >> STAMP_SHIFT
                         ? bench_workload->op_name
                         : kind_name[op.kind];
  pmkit_mark_begin(name);
#ifndef BENCH_VOLATILE
  cur.in_op = 1;
  cur.t = t;
#endif
#ifdef BENCH_PMDK
  if (bench_workload->notx) { /* Mirror-style: the workload persists */
    if (!(err = bench_workload->op(root, t, &op, scratch))) {
      *done = next;
      pmemobj_persist(bench_pop, done, sizeof *done);
    }
    op_end();
    pmkit_mark_end(name);
    return err;
  }
  TX_BEGIN(bench_pop) {
    if ((err = bench_workload->op(root, t, &op, scratch)) != 0)
      pmemobj_tx_abort(ECANCELED);
    pmemobj_tx_add_range_direct(done, sizeof *done);
    *done = next;
  }
  TX_ONABORT { err = err ? err : -1; }
  TX_END
  op_end(); /* only now may others see what it wrote */
#elif defined(BENCH_VOLATILE)
  if (!(err = bench_workload->op(root, t, &op, scratch)))
    *done = next;
#elif defined(BENCH_SSAPP)
  err = op_fase(root, t, (uint64_t)op.kind, op.key, op.stamp, op.rnd, scratch,
                done, next);
  if (err) /* a FASE cannot be rolled back: its partial work is committed */
    die("thread %u: an operation failed inside a FASE", t);
  op_end();
#elif defined(BENCH_CLOBBER)
  err = op_fase(root, t, (uint64_t)op.kind, op.key, op.stamp, op.rnd, scratch,
                cfg.value_size, done, next);
  if (err) /* a FASE cannot be rolled back: its partial work is committed */
    die("thread %u: an operation failed inside a FASE", t);
  op_end();
#else
  err = bench_workload->op(root, t, &op, scratch);
  struct undo_log *l = hdr->slot[t].undo;
  if (l && l->used) {
    if (!err)
      undo_commit(l, done, next);
    else if (undo_rollback(l))
      die("thread %u's undo log is malformed", t);
    else
      cur.nfrees = 0; /* the rolled-back state still refers to them */
  } else if (!err) {
    *done = next; /* only once the operation is durable */
    PM_PERSIST(done, sizeof *done);
  }
  op_end(); /* only now may others see what it wrote */
#endif
  pmkit_mark_end(name);
  return err;
}

static int run_op(unsigned t, uint64_t i, void *scratch) {
  struct bench_op op = bench_op_at(t, i);
  return apply(&op, t, &hdr->slot[t].done, i + 1, scratch);
}

/* The load: an insert per key, resumable after a crash. */
static int load(void *scratch) {
  for (uint64_t k = hdr->load_next; k < cfg.keys; k++) {
    if (bench_workload->set && k % 2)
      continue;
    struct bench_op op = {BENCH_INSERT, k, bench_load_stamp(k), 0};
    if (apply(&op, 0, &hdr->load_next, k + 1, scratch))
      return -1;
  }
  hdr_store(&hdr->loaded, 1);
  return 0;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  /* Yield while waiting: under valgrind (bench/ssapp_insns.py), which runs
   * one thread at a time, a spin would count as the operations' work. */
  while (!atomic_load_explicit(&start_flag, memory_order_acquire))
    sched_yield();
  for (uint64_t i = hdr->slot[w->id].done;
       !atomic_load_explicit(&stop_flag, memory_order_relaxed) &&
       (!opt.ops || i < w->target);
       i++) {
    if (run_op(w->id, i, w->scratch)) {
      fprintf(stderr, "bench_%s: thread %u, operation %" PRIu64 " failed\n",
              bench_workload->name, w->id, i);
      w->failed = 1;
      atomic_store(&stop_flag, 1);
      break;
    }
    atomic_store_explicit(&w->ops, w->ops + 1, memory_order_relaxed);
  }
  return NULL;
}

static uint64_t total_ops(void) {
  uint64_t n = 0;
  for (unsigned t = 0; t < cfg.threads; t++)
    n += atomic_load_explicit(&workers[t].ops, memory_order_relaxed);
  return n;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) && errno == EINTR)
    ;
}

/* Set up the header of a new run (the magic follows once the workload's
 * init is durable), or check that an existing one matches. */
static void hdr_setup(int fresh) {
  if (fresh) {
#ifdef BENCH_PMDK
    TX_BEGIN(bench_pop) {
      pmemobj_tx_add_range_direct(hdr, offsetof(struct run_hdr, slot));
#endif
      hdr->keys = cfg.keys;
      hdr->seed = cfg.seed;
      hdr->read_pct = cfg.read_pct;
      hdr->value_size = cfg.value_size;
      hdr->threads = cfg.threads;
      hdr->root_size = bench_workload->root_size;
      /* Through a DRAM copy: libc's own writes into the pool are not
       * traced, and the explorer must see every write. */
      char name[sizeof hdr->workload] = "";
      snprintf(name, sizeof name, "%s", bench_workload->name);
      memcpy(hdr->workload, name, sizeof name);
      PM_PERSIST(hdr, offsetof(struct run_hdr, slot));
#ifdef BENCH_PMDK
    }
    TX_END
#endif
    return;
  }
  if (strncmp(hdr->workload, bench_workload->name, sizeof hdr->workload))
    die("the pool holds a run of %.*s", (int)sizeof hdr->workload,
        hdr->workload);
  if (hdr->keys != cfg.keys || hdr->seed != cfg.seed ||
      hdr->read_pct != cfg.read_pct || hdr->value_size != cfg.value_size)
    die("the pool holds a run with other parameters; use a fresh pool");
  if (hdr->threads != cfg.threads) {
    /* A loaded pool whose run has not started (--load-only) takes any
     * thread count; a started run resumes only with its own. */
    for (unsigned t = 0; t < MAX_THREADS; t++)
      if (hdr->slot[t].done)
        die("the pool holds a run of %u thread(s); use a fresh pool",
            (unsigned)hdr->threads);
    hdr_store(&hdr->threads, cfg.threads);
  }
}

/* ---- the checker ----------------------------------------------------- */

struct bench_check {
  uint64_t *stamp;  /* per key: the stamp reported */
  uint8_t *present; /* per key: reported          */
  char why[512];
  int bad;
};

int bench_fail(struct bench_check *c, const char *fmt, ...) {
  if (!c->bad) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->bad = 1;
  }
  return -1;
}

uint64_t bench_done(unsigned t) {
  return t < cfg.threads && hdr ? hdr->slot[t].done : 0;
}

int bench_found(struct bench_check *c, uint64_t key, uint64_t stamp) {
  if (key >= cfg.keys)
    return bench_fail(c, "key %" PRIu64 " is out of range", key);
  if (c->present[key])
    return bench_fail(c, "key %" PRIu64 " is present twice", key);
  c->present[key] = 1;
  c->stamp[key] = stamp;
  return 0;
}

int bench_found_value(struct bench_check *c, uint64_t key, const void *val) {
  uint64_t stamp;
  if (!val || bench_value_check(val, cfg.value_size, key, &stamp))
    return bench_fail(c, "key %" PRIu64 ": the value is torn or missing", key);
#if !defined(BENCH_PMDK) && !defined(BENCH_VOLATILE)
  if (pmkit_usable_size(pool, val) < cfg.value_size)
    return bench_fail(c, "key %" PRIu64 ": its value's block is free", key);
#endif
  return bench_found(c, key, stamp);
}

#ifndef BENCH_VOLATILE
static void stamp_text(uint64_t s, char *buf, size_t n) {
  if (s >> STAMP_SHIFT)
    snprintf(buf, n, "thread %u op %" PRIu64, (unsigned)(s >> STAMP_SHIFT) - 1,
             (uint64_t)(s & ((1ull << STAMP_SHIFT) - 1)));
  else
    snprintf(buf, n, "the load");
}

/* Several threads: interleavings differ, so judge each key by rules every
 * interleaving of the completed operations (and those in flight) obeys.
 * A write "overwrites" a key's value: an update (key-value) or a delete
 * (set). Present: the value came from a write its thread had reached and
 * that thread did not overwrite later, or from the load with no completed
 * overwrite by anyone. Absent: only where some thread reached a delete of
 * the key, or (a set) no one loaded or inserted it. */
static int compare_threads(struct bench_check *c) {
  uint64_t keys = cfg.keys;
  unsigned nt = cfg.threads;
  int set = bench_workload->set;
  enum { OVERWRITTEN = 1, DELETE_REACHED = 2, INSERTED = 4 };
  uint8_t *fl = calloc(keys, 1);
  /* Per thread and key: 1 + the index of its last completed overwrite. */
  uint64_t *lastw = keys * nt <= (1ull << 27) ? calloc(keys * nt, 8) : NULL;
  if (!fl)
    die("out of memory for the replay");
  for (unsigned t = 0; t < nt; t++)
    for (uint64_t i = 0; i <= hdr->slot[t].done; i++) {
      struct bench_op op = bench_op_at(t, i);
      int completed = i < hdr->slot[t].done;
      int over = set ? op.kind == BENCH_DELETE : op.kind == BENCH_UPDATE;
      if (op.kind == BENCH_DELETE)
        fl[op.key] |= DELETE_REACHED;
      if (!completed)
        continue;
      if (op.kind == BENCH_INSERT)
        fl[op.key] |= INSERTED;
      if (over) {
        fl[op.key] |= OVERWRITTEN;
        if (lastw)
          lastw[t * keys + op.key] = i + 1;
      }
    }
  int rc = 0;
  char b[64];
  for (uint64_t k = 0; k < keys && !rc; k++) {
    if (!c->present[k]) {
      if (!(fl[k] & DELETE_REACHED) &&
          (!set || k % 2 == 0 || (fl[k] & INSERTED)))
        rc = bench_fail(c,
                        "key %" PRIu64 " is missing, though no thread reached "
                        "a delete of it",
                        k);
      continue;
    }
    uint64_t s = c->stamp[k];
    if (!(s >> STAMP_SHIFT)) {
      if (s != bench_load_stamp(k) || (set && k % 2) || (fl[k] & OVERWRITTEN))
        rc = bench_fail(c,
                        "key %" PRIu64 " holds the load's value, though a "
                        "completed operation replaced it",
                        k);
      continue;
    }
    unsigned t = (unsigned)(s >> STAMP_SHIFT) - 1;
    uint64_t i = s & ((1ull << STAMP_SHIFT) - 1);
    struct bench_op op = t < nt ? bench_op_at(t, i) : (struct bench_op){0};
    stamp_text(s, b, sizeof b);
    if (t >= nt || i > hdr->slot[t].done || op.key != k ||
        op.kind == BENCH_READ || op.kind == BENCH_DELETE)
      rc = bench_fail(c,
                      "key %" PRIu64 " holds a value from %s, which never "
                      "wrote it",
                      k, b);
    else if (lastw && lastw[t * keys + k] > i + 1)
      rc = bench_fail(c,
                      "key %" PRIu64 " holds the value of %s, which its "
                      "thread replaced at op %" PRIu64,
                      k, b, lastw[t * keys + k] - 1);
  }
  free(fl);
  free(lastw);
  return rc;
}

/* Compare the reports with the stream. One thread: the exact state after
 * `done` operations, or after done + 1 for the key of the one in flight.
 * Several threads: compare_threads. */
static int compare(struct bench_check *c) {
  uint64_t keys = cfg.keys;
  int set = bench_workload->set;
  uint8_t *exp_present = calloc(keys, 1);
  uint64_t *exp_stamp = calloc(keys, sizeof *exp_stamp);
  if (!exp_present || !exp_stamp)
    die("out of memory for the replay");
  /* An interrupted load holds the keys below its cursor; the next one to
   * load is in flight. */
  int loading = !hdr->loaded;
  for (uint64_t k = 0; k < keys; k++) {
    exp_present[k] = (!set || k % 2 == 0) && (!loading || k < hdr->load_next);
    exp_stamp[k] = bench_load_stamp(k);
  }
  int rc = 0;
  char a[64], b[64];
  if (cfg.threads == 1 || loading) {
    uint64_t done = loading ? 0 : hdr->slot[0].done;
    for (uint64_t i = 0; i < done; i++) {
      struct bench_op op = bench_op_at(0, i);
      if (op.kind == BENCH_UPDATE ||
          (op.kind == BENCH_INSERT && !exp_present[op.key])) {
        exp_present[op.key] = 1;
        exp_stamp[op.key] = op.stamp;
      } else if (op.kind == BENCH_DELETE) {
        exp_present[op.key] = 0;
      }
    }
    struct bench_op fl = bench_op_at(0, done); /* in flight, maybe */
    if (loading) {
      uint64_t k = hdr->load_next + (set && hdr->load_next % 2);
      fl = (struct bench_op){k < keys ? BENCH_INSERT : BENCH_READ, k,
                             bench_load_stamp(k), 0};
      done = hdr->load_next;
    }
    for (uint64_t k = 0; k < keys && !rc; k++) {
      int ok = c->present[k] == exp_present[k] &&
               (!exp_present[k] || c->stamp[k] == exp_stamp[k]);
      if (!ok && k == fl.key && fl.kind != BENCH_READ) {
        if (fl.kind == BENCH_DELETE)
          ok = !c->present[k];
        else if (fl.kind == BENCH_UPDATE || !exp_present[k])
          ok = c->present[k] && c->stamp[k] == fl.stamp;
      }
      if (ok)
        continue;
      stamp_text(exp_stamp[k], a, sizeof a);
      stamp_text(c->stamp[k], b, sizeof b);
      rc = bench_fail(
          c, "key %" PRIu64 ": expected %s%s after %" PRIu64 " %s, found %s%s",
          k, exp_present[k] ? "the value of " : "no entry",
          exp_present[k] ? a : "", done,
          loading ? "keys of the load" : "operations",
          c->present[k] ? "the value of " : "no entry", c->present[k] ? b : "");
    }
  } else {
    rc = compare_threads(c);
  }
  free(exp_present);
  free(exp_stamp);
  return rc;
}

static int cmd_check(const char *path) {
  char why[256];
  if (pool_setup(path, 0, why, sizeof why)) {
    fprintf(stderr, "bench_%s: cannot open %s\n", bench_workload->name, why);
    return 2;
  }
  if (undo_recover(why, sizeof why)) {
    printf("INCONSISTENT: %s\n", why);
    pool_teardown();
    return 1;
  }
  if (hdr->magic != HDR_MAGIC ||
      (!hdr->loaded && bench_workload->own_compare)) {
    printf("consistent: the run had not finished %s\n",
           hdr->magic != HDR_MAGIC ? "its set-up" : "loading");
    pool_teardown();
    return 0;
  }
  cfg.keys = hdr->keys;
  cfg.seed = hdr->seed;
  cfg.read_pct = (unsigned)hdr->read_pct;
  cfg.value_size = hdr->value_size;
  cfg.threads = (unsigned)hdr->threads;
  struct bench_check c = {calloc(cfg.keys, sizeof(uint64_t)),
                          calloc(cfg.keys, 1), "", 0};
  if (!c.stamp || !c.present)
    die("out of memory");
  int rc = 0;
#if defined(BENCH_CLOBBER) || defined(BENCH_SSAPP)
  /* Recovery first: it re-executes operations, which need the locks. */
  if (attach_workload())
    rc = bench_fail(&c, "cannot attach the workload's volatile state");
#ifdef BENCH_CLOBBER
  if (!rc && clobber_recover(c.why, sizeof c.why))
    rc = -1;
#else
  if (!rc && ssapp_recover(c.why, sizeof c.why))
    rc = -1;
#endif
#endif
#ifndef BENCH_PMDK
  if (!rc && pmkit_pool_check(pool))
    rc = bench_fail(&c, "pool metadata: %s", pmkit_errormsg());
#endif
  if (!rc && attach_workload())
    rc = bench_fail(&c, "cannot attach the workload's volatile state");
  if (!rc)
    rc = bench_workload->check(WROOT(hdr), &c) || c.bad;
  if (!rc && !bench_workload->own_compare)
    rc = compare(&c);
  uint64_t done = 0;
  for (unsigned t = 0; t < cfg.threads; t++)
    done += hdr->slot[t].done;
  if (rc)
    printf("INCONSISTENT: %s\n", c.why[0] ? c.why : "(no reason given)");
  else
#ifdef BENCH_CLOBBER
    printf("consistent: %" PRIu64 " operations completed; recovery "
           "re-executed %u interrupted FASE(s), rolled back %u\n",
           done, clobber_reexecuted, clobber_rolled_back);
#elif defined(BENCH_SSAPP)
    printf("consistent: %" PRIu64 " operations completed; recovery "
           "resumed %d interrupted FASE(s)\n",
           done, ssapp_resumed);
#else
    printf("consistent: %" PRIu64 " operations completed\n", done);
#endif
  free(c.stamp);
  free(c.present);
  pool_teardown();
  return rc ? 1 : 0;
}
#endif /* !BENCH_VOLATILE */

static int cmd_check_or_refuse(const char *path) {
#ifdef BENCH_VOLATILE
  (void)path;
  die("the volatile variant keeps nothing to check");
#else
  return cmd_check(path);
#endif
}

/* ---- command line -------------------------------------------------------- */

static const char usage_text[] =
    "usage: bench_NAME [--threads N] [--keys N] [--ops N | --seconds S]\n"
    "                  [--warmup S] [--scale F] [--seed S] [--read-pct P]\n"
    "                  [--value-size B] [--pool PATH | --pool-dir DIR]\n"
    "                  [--pool-mib M] [--keep] [--load-only]\n"
    "       bench_NAME --check POOL\n"
    "       bench_NAME --info\n"
    "Runs the workload and prints one JSON line. --ops runs a fixed count\n"
    "(split over the threads) and resumes an interrupted run of the same\n"
    "pool; otherwise it runs --seconds after --warmup. --scale multiplies\n"
    "keys and ops. --load-only loads the keys into --pool and stops: a run\n"
    "on a copy of that pool may choose its --threads. --check exits 0 if\n"
    "POOL is consistent, 1 if not.\n";

static uint64_t num(const char *name, const char *v, uint64_t lo, uint64_t hi) {
  char *end;
  errno = 0;
  unsigned long long n = v ? strtoull(v, &end, 0) : 0;
  if (!v || errno || *end || n < lo || n > hi)
    die("%s needs an integer in [%" PRIu64 ", %" PRIu64 "]", name, lo, hi);
  return n;
}

static double real(const char *name, const char *v) {
  char *end;
  double d = v ? strtod(v, &end) : 0;
  if (!v || *end || !(d >= 0))
    die("%s needs a non-negative number", name);
  return d;
}

static void parse(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(usage_text, stdout);
      exit(0);
    } else if (!strcmp(a, "--keep")) {
      opt.keep = 1;
      continue;
    } else if (!strcmp(a, "--info")) {
      opt.info = 1;
      continue;
    } else if (!strcmp(a, "--load-only")) {
      opt.load_only = 1;
      continue;
    }
    i++;
    if (!strcmp(a, "--threads"))
      cfg.threads = (unsigned)num(a, v, 1, MAX_THREADS);
    else if (!strcmp(a, "--keys"))
      cfg.keys = num(a, v, 2, 1ull << 32);
    else if (!strcmp(a, "--ops"))
      opt.ops = num(a, v, 1, 1ull << 40);
    else if (!strcmp(a, "--seconds"))
      opt.seconds = real(a, v);
    else if (!strcmp(a, "--warmup"))
      opt.warmup = real(a, v);
    else if (!strcmp(a, "--scale"))
      cfg.scale = real(a, v);
    else if (!strcmp(a, "--seed"))
      cfg.seed = num(a, v, 0, UINT64_MAX);
    else if (!strcmp(a, "--read-pct"))
      cfg.read_pct = (unsigned)num(a, v, 0, 100);
    else if (!strcmp(a, "--value-size"))
      cfg.value_size = num(a, v, 32, 1u << 16) & ~(size_t)7;
    else if (!strcmp(a, "--pool"))
      opt.pool = v;
    else if (!strcmp(a, "--pool-dir"))
      opt.pool_dir = v;
    else if (!strcmp(a, "--pool-mib"))
      opt.pool_mib = num(a, v, 8, 1u << 20);
    else if (!strcmp(a, "--check"))
      opt.check = v;
    else {
      fputs(usage_text, stderr);
      die("unknown option %s", a);
    }
    if (!v)
      die("%s needs a value", a);
  }
}

int main(int argc, char **argv) {
  if (bench_workload->read_pct)
    cfg.read_pct = bench_workload->read_pct;
  parse(argc, argv);
#ifdef BENCH_PMDK
  pmdk_fix_address(argv);
#endif
  if (opt.info) {
    printf("{\"workload\": \"%s\", \"variant\": \"%s\"}\n",
           bench_workload->name, VARIANT);
    return 0;
  }
  if (opt.check)
    return cmd_check_or_refuse(opt.check);
#ifdef BENCH_VOLATILE
  if (opt.load_only)
    die("the volatile variant keeps nothing to load into");
#endif
  if (opt.load_only && !opt.pool)
    die("--load-only needs --pool");
  if (cfg.scale != 1.0) {
    cfg.keys = (uint64_t)(cfg.keys * cfg.scale) < 2
                   ? 2
                   : (uint64_t)(cfg.keys * cfg.scale);
    if (opt.ops)
      opt.ops =
          (uint64_t)(opt.ops * cfg.scale) ? (uint64_t)(opt.ops * cfg.scale) : 1;
  }
  if (!opt.pool_mib) /* room for the values twice over, and the rest */
    opt.pool_mib = 64 + (cfg.keys * (cfg.value_size + 256) * 3 >> 20);

  char path[4096] = "", why[512];
  int fresh = 1, remove_after = 0;
#ifndef BENCH_VOLATILE
  if (opt.pool) {
    snprintf(path, sizeof path, "%s", opt.pool);
    fresh = access(path, F_OK) != 0;
  } else {
    snprintf(path, sizeof path, "%s/bench-%s-%d.pool",
             opt.pool_dir ? opt.pool_dir : "/dev/shm", bench_workload->name,
             (int)getpid());
    remove_after = !opt.keep;
  }
#endif
  if (pool_setup(path, fresh, why, sizeof why) || undo_recover(why, sizeof why))
    die("%s", why);
  fresh = fresh || hdr->magic != HDR_MAGIC;
  hdr_setup(fresh);
  if (attach_workload())
    die("attach failed");
#ifdef BENCH_CLOBBER
  if (clobber_recover(why, sizeof why))
    die("%s", why);
#elif defined(BENCH_SSAPP)
  if (ssapp_recover(why, sizeof why))
    die("%s", why);
#endif
  if (fresh) {
    int err;
#ifdef BENCH_PMDK
    TX_BEGIN(bench_pop) { err = bench_workload->init(WROOT(hdr)); }
    TX_ONABORT { err = -1; }
    TX_END
#else
    err = bench_workload->init(WROOT(hdr));
#endif
    if (err)
      die("init failed");
    hdr_store(&hdr->magic, HDR_MAGIC);
  }
  double l0 = now();
#ifdef BENCH_SSAPP
  void *scratch = ssapp_scratch(0);
#else
  void *scratch = calloc(1, cfg.value_size);
#endif
  if (!scratch || (!hdr->loaded && load(scratch)))
    die("load failed");
#ifndef BENCH_SSAPP
  free(scratch);
#endif
  double load_s = now() - l0;
  if (opt.load_only) {
    pool_teardown();
    printf("{\"benchmark\": \"%s\", \"variant\": \"%s\", \"keys\": %" PRIu64
           ", \"load_seconds\": %.3f}\n",
           bench_workload->name, VARIANT, cfg.keys, load_s);
    return 0;
  }

  for (unsigned t = 0; t < cfg.threads; t++) {
    struct worker *w = &workers[t];
    w->id = t;
    w->target = opt.ops / cfg.threads + (t < opt.ops % cfg.threads);
#ifdef BENCH_SSAPP
    w->scratch = ssapp_scratch(t);
#else
    w->scratch = calloc(1, cfg.value_size);
#endif
    if (!w->scratch || pthread_create(&w->tid, NULL, worker_main, w))
      die("cannot start thread %u", t);
  }
  double t0 = now(), t1;
  uint64_t n0 = 0, n1;
  pmkit_clobber_stats c0 = {0}, c1 = {0};
#ifdef BENCH_CLOBBER
  pmkit_clobber_stats_get(&c0);
#endif
  atomic_store_explicit(&start_flag, 1, memory_order_release);
  if (!opt.ops) {
    sleep_s(opt.warmup);
    n0 = total_ops();
#ifdef BENCH_CLOBBER
    pmkit_clobber_stats_get(&c0);
#endif
    t0 = now();
    sleep_s(opt.seconds);
    n1 = total_ops();
#ifdef BENCH_CLOBBER
    pmkit_clobber_stats_get(&c1);
#endif
    t1 = now();
    atomic_store(&stop_flag, 1);
  }
  int failed = 0;
  for (unsigned t = 0; t < cfg.threads; t++) {
    pthread_join(workers[t].tid, NULL);
    failed |= workers[t].failed;
#ifndef BENCH_SSAPP
    free(workers[t].scratch);
#endif
  }
  if (opt.ops) {
    t1 = now();
    n1 = total_ops();
#ifdef BENCH_CLOBBER
    pmkit_clobber_stats_get(&c1);
#endif
  }
  pool_teardown();
  if (remove_after)
    unlink(path);
  if (failed)
    return 1;
  double secs = t1 - t0;
  /* Clobber mode's log per operation (FASEs counted over the same window;
   * ratios, so the window's edges do not matter). */
  char logs[256] = "";
  double nf = c1.fases > c0.fases ? (double)(c1.fases - c0.fases) : 0;
  if (nf > 0)
    snprintf(logs, sizeof logs,
             ", \"log_entries_per_op\": %.3f, \"log_bytes_per_op\": %.1f, "
             "\"vlog_bytes_per_op\": %.1f, \"fences_per_op\": %.3f",
             (double)(c1.entries - c0.entries) / nf,
             (double)(c1.log_bytes - c0.log_bytes) / nf,
             (double)(c1.vlog_bytes - c0.vlog_bytes) / nf,
             (double)(c1.fences - c0.fences) / nf);
  printf("{\"benchmark\": \"%s\", \"variant\": \"%s\", \"threads\": %u, "
         "\"keys\": %" PRIu64 ", \"value_size\": %zu, \"read_pct\": %u, "
         "\"seed\": %" PRIu64 ", \"ops\": %" PRIu64 ", \"seconds\": %.6f, "
         "\"ops_per_sec\": %.1f, \"load_seconds\": %.3f, \"tracing\": %d%s}\n",
         bench_workload->name, VARIANT, cfg.threads, cfg.keys, cfg.value_size,
         cfg.read_pct, cfg.seed, n1 - n0, secs,
         secs > 0 ? (double)(n1 - n0) / secs : 0.0, load_s, pmkit_tracing(),
         logs);
  return 0;
}
