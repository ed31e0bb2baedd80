/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver.c -- main() of every benchmark workload (bench.h), the same in
 * every variant. It parses the command line, keeps the persistent run
 * header (configuration, load cursor, per-thread completed-operation
 * counters: struct run_hdr in backend.h), loads the keys, runs the threads
 * over the seeded operation stream, times them and prints the JSON line
 * bench/run.py reads; and `--check POOL` recovers a pool left by a crash
 * and compares what the workload reports against a replay of the stream.
 * Whatever differs by variant -- the pool or heap, how one operation is
 * made durable (apply), recovery, what --check and the JSON line add --
 * is the variant's backend's (backend.h), linked in its place. Entry
 * points: main, and bench.h's stream, value and checker functions.
 * Usage: see usage_text below.
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

#include "backend.h"
#include "bench.h"

#define GOLDEN 0x9e3779b97f4a7c15ull
#define STAMP_SHIFT 48

static struct bench_config cfg = {1, 100000, 1, 50, 256, 1.0};
const struct bench_config *bench_cfg = &cfg;
struct run_hdr *bench_hdr;

static struct {
  uint64_t ops; /* 0: timed */
  double seconds, warmup;
  const char *pool, *pool_dir, *check;
  uint64_t pool_mib;
  int keep, info, load_only;
} opt = {0, 1.0, 0.2, NULL, NULL, NULL, 0, 0, 0, 0};

_Noreturn void bench_die(const char *fmt, ...) {
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

/* ---- the backend's entries that it may leave out (backend.h) ------------- */

static int atomically(int (*fn)(void *arg), void *arg, void *snap, size_t n) {
  if (bench_backend.atomically)
    return bench_backend.atomically(fn, arg, snap, n);
  return fn(arg);
}

static int rollback(char *why, size_t wn) {
  return bench_backend.rollback ? bench_backend.rollback(why, wn) : 0;
}

/* The workload's attach (0 or -1), after the backend's hook. */
static int attach_workload(void) {
  if (bench_backend.attach)
    bench_backend.attach();
  return bench_workload->attach ? bench_workload->attach(bench_root()) : 0;
}

static int resume(char *why, size_t wn) {
  return bench_backend.resume ? bench_backend.resume(why, wn) : 0;
}

int bench_lock_mem(void **mem, size_t bytes) {
  if (bench_backend.lock_mem)
    return bench_backend.lock_mem(mem, bytes);
  free(*mem);
  *mem = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  return *mem ? 0 : -1;
}

static void *scratch_get(unsigned t) {
  if (bench_backend.scratch)
    return bench_backend.scratch(t);
  return calloc(1, cfg.value_size);
}

static void scratch_put(void *scratch) {
  if (!bench_backend.scratch)
    free(scratch);
}

static void sample(int edge) {
  if (bench_backend.sample)
    bench_backend.sample(edge);
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

/* ---- the run header ------------------------------------------------------ */

static size_t hdr_total(void) {
  return sizeof(struct run_hdr) + ((bench_workload->root_size + 63) & ~63ul);
}

/* Persist a header word the driver owns. */
struct word_store {
  uint64_t *w, v;
};

static int store_word(void *arg) {
  struct word_store *s = arg;
  *s->w = s->v;
  PM_PERSIST(s->w, sizeof *s->w);
  return 0;
}

static void hdr_store(uint64_t *w, uint64_t v) {
  struct word_store s = {w, v};
  atomically(store_word, &s, w, sizeof *w);
}

/* A new run's configuration into the header, made durable (the magic
 * follows once the workload's init is durable). */
static int hdr_fill(void *arg) {
  (void)arg;
  bench_hdr->keys = cfg.keys;
  bench_hdr->seed = cfg.seed;
  bench_hdr->read_pct = cfg.read_pct;
  bench_hdr->value_size = cfg.value_size;
  bench_hdr->threads = cfg.threads;
  bench_hdr->root_size = bench_workload->root_size;
  /* Through a DRAM copy: libc's own writes into the pool are not traced,
   * and the explorer must see every write. */
  char name[sizeof bench_hdr->workload] = "";
  snprintf(name, sizeof name, "%s", bench_workload->name);
  memcpy(bench_hdr->workload, name, sizeof name);
  PM_PERSIST(bench_hdr, offsetof(struct run_hdr, slot));
  return 0;
}

/* The workload's init on the fresh root (0 or -1). */
static int init_workload(void *arg) {
  (void)arg;
  return bench_workload->init(bench_root());
}

/* Set up the header of a new run, or check that an existing one matches. */
static void hdr_setup(int fresh) {
  if (fresh) {
    atomically(hdr_fill, NULL, bench_hdr, offsetof(struct run_hdr, slot));
    return;
  }
  if (strncmp(bench_hdr->workload, bench_workload->name,
              sizeof bench_hdr->workload))
    bench_die("the pool holds a run of %.*s", (int)sizeof bench_hdr->workload,
              bench_hdr->workload);
  if (bench_hdr->keys != cfg.keys || bench_hdr->seed != cfg.seed ||
      bench_hdr->read_pct != cfg.read_pct ||
      bench_hdr->value_size != cfg.value_size)
    bench_die("the pool holds a run with other parameters; use a fresh pool");
  if (bench_hdr->threads != cfg.threads) {
    /* A loaded pool whose run has not started (--load-only) takes any
     * thread count; a started run resumes only with its own. */
    for (unsigned t = 0; t < BENCH_MAX_THREADS; t++)
      if (bench_hdr->slot[t].done)
        bench_die("the pool holds a run of %u thread(s); use a fresh pool",
                  (unsigned)bench_hdr->threads);
    hdr_store(&bench_hdr->threads, cfg.threads);
  }
}

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
static struct worker workers[BENCH_MAX_THREADS];
static const char *const kind_name[] = {"read", "update", "insert", "delete"};

/* One operation of thread t, made durable with *done = next by the
 * backend; a trace mark names it. */
static int apply(const struct bench_op *op, unsigned t, uint64_t *done,
                 uint64_t next, void *scratch) {
  const char *name = bench_workload->op_name && op->stamp >> STAMP_SHIFT
                         ? bench_workload->op_name
                         : kind_name[op->kind];
  pmkit_mark_begin(name);
  int err = backend_apply(op, t, done, next, scratch);
  pmkit_mark_end(name);
  return err;
}

static int run_op(unsigned t, uint64_t i, void *scratch) {
  struct bench_op op = bench_op_at(t, i);
  return apply(&op, t, &bench_hdr->slot[t].done, i + 1, scratch);
}

/* The load: an insert per key, resumable after a crash. */
static int load(void *scratch) {
  for (uint64_t k = bench_hdr->load_next; k < cfg.keys; k++) {
    if (bench_workload->set && k % 2)
      continue;
    struct bench_op op = {BENCH_INSERT, k, bench_load_stamp(k), 0};
    if (apply(&op, 0, &bench_hdr->load_next, k + 1, scratch))
      return -1;
  }
  hdr_store(&bench_hdr->loaded, 1);
  return 0;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  /* Yield while waiting: under valgrind (bench/ssapp_insns.py), which runs
   * one thread at a time, a spin would count as the operations' work. */
  while (!atomic_load_explicit(&start_flag, memory_order_acquire))
    sched_yield();
  for (uint64_t i = bench_hdr->slot[w->id].done;
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
  return t < cfg.threads && bench_hdr ? bench_hdr->slot[t].done : 0;
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
  if (bench_backend.block_ok && !bench_backend.block_ok(val, cfg.value_size))
    return bench_fail(c, "key %" PRIu64 ": its value's block is free", key);
  return bench_found(c, key, stamp);
}

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
    bench_die("out of memory for the replay");
  for (unsigned t = 0; t < nt; t++)
    for (uint64_t i = 0; i <= bench_hdr->slot[t].done; i++) {
      struct bench_op op = bench_op_at(t, i);
      int completed = i < bench_hdr->slot[t].done;
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
    if (t >= nt || i > bench_hdr->slot[t].done || op.key != k ||
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
    bench_die("out of memory for the replay");
  /* An interrupted load holds the keys below its cursor; the next one to
   * load is in flight. */
  int loading = !bench_hdr->loaded;
  for (uint64_t k = 0; k < keys; k++) {
    exp_present[k] =
        (!set || k % 2 == 0) && (!loading || k < bench_hdr->load_next);
    exp_stamp[k] = bench_load_stamp(k);
  }
  int rc = 0;
  char a[64], b[64];
  if (cfg.threads == 1 || loading) {
    uint64_t done = loading ? 0 : bench_hdr->slot[0].done;
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
      uint64_t k = bench_hdr->load_next + (set && bench_hdr->load_next % 2);
      fl = (struct bench_op){k < keys ? BENCH_INSERT : BENCH_READ, k,
                             bench_load_stamp(k), 0};
      done = bench_hdr->load_next;
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
  if (!bench_backend.persistent)
    bench_die("the %s variant keeps nothing to check", bench_backend.variant);
  if (bench_backend.open(path, 0, hdr_total(), opt.pool_mib, why, sizeof why)) {
    fprintf(stderr, "bench_%s: cannot open %s\n", bench_workload->name, why);
    return 2;
  }
  if (rollback(why, sizeof why)) {
    printf("INCONSISTENT: %s\n", why);
    bench_backend.close();
    return 1;
  }
  if (bench_hdr->magic != BENCH_HDR_MAGIC ||
      (!bench_hdr->loaded && bench_workload->own_compare)) {
    printf("consistent: the run had not finished %s\n",
           bench_hdr->magic != BENCH_HDR_MAGIC ? "its set-up" : "loading");
    bench_backend.close();
    return 0;
  }
  cfg.keys = bench_hdr->keys;
  cfg.seed = bench_hdr->seed;
  cfg.read_pct = (unsigned)bench_hdr->read_pct;
  cfg.value_size = bench_hdr->value_size;
  cfg.threads = (unsigned)bench_hdr->threads;
  struct bench_check c = {calloc(cfg.keys, sizeof(uint64_t)),
                          calloc(cfg.keys, 1), "", 0};
  if (!c.stamp || !c.present)
    bench_die("out of memory");
  int rc = 0;
  if (bench_backend.resume) {
    /* Recovery first: it re-executes operations, which need the locks. */
    if (attach_workload())
      rc = bench_fail(&c, "cannot attach the workload's volatile state");
    if (!rc && resume(c.why, sizeof c.why))
      rc = -1;
  }
  if (!rc && bench_backend.check_pool &&
      bench_backend.check_pool(c.why, sizeof c.why))
    rc = -1;
  if (!rc && attach_workload())
    rc = bench_fail(&c, "cannot attach the workload's volatile state");
  if (!rc)
    rc = bench_workload->check(bench_root(), &c) || c.bad;
  if (!rc && !bench_workload->own_compare)
    rc = compare(&c);
  uint64_t done = 0;
  for (unsigned t = 0; t < cfg.threads; t++)
    done += bench_hdr->slot[t].done;
  char note[256] = "";
  if (bench_backend.recovery_note)
    bench_backend.recovery_note(note, sizeof note);
  if (rc)
    printf("INCONSISTENT: %s\n", c.why[0] ? c.why : "(no reason given)");
  else
    printf("consistent: %" PRIu64 " operations completed%s\n", done, note);
  free(c.stamp);
  free(c.present);
  bench_backend.close();
  return rc ? 1 : 0;
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
    bench_die("%s needs an integer in [%" PRIu64 ", %" PRIu64 "]", name, lo,
              hi);
  return n;
}

static double real(const char *name, const char *v) {
  char *end;
  double d = v ? strtod(v, &end) : 0;
  if (!v || *end || !(d >= 0))
    bench_die("%s needs a non-negative number", name);
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
      cfg.threads = (unsigned)num(a, v, 1, BENCH_MAX_THREADS);
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
      bench_die("unknown option %s", a);
    }
    if (!v)
      bench_die("%s needs a value", a);
  }
}

int main(int argc, char **argv) {
  if (bench_workload->read_pct)
    cfg.read_pct = bench_workload->read_pct;
  parse(argc, argv);
  if (bench_backend.start)
    bench_backend.start(argv);
  if (opt.info) {
    printf("{\"workload\": \"%s\", \"variant\": \"%s\"}\n",
           bench_workload->name, bench_backend.variant);
    return 0;
  }
  if (opt.check)
    return cmd_check(opt.check);
  if (opt.load_only && !bench_backend.persistent)
    bench_die("the %s variant keeps nothing to load into",
              bench_backend.variant);
  if (opt.load_only && !opt.pool)
    bench_die("--load-only needs --pool");
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
  if (bench_backend.persistent) {
    if (opt.pool) {
      snprintf(path, sizeof path, "%s", opt.pool);
      fresh = access(path, F_OK) != 0;
    } else {
      snprintf(path, sizeof path, "%s/bench-%s-%d.pool",
               opt.pool_dir ? opt.pool_dir : "/dev/shm", bench_workload->name,
               (int)getpid());
      remove_after = !opt.keep;
    }
  }
  if (bench_backend.open(path, fresh, hdr_total(), opt.pool_mib, why,
                         sizeof why) ||
      rollback(why, sizeof why))
    bench_die("%s", why);
  fresh = fresh || bench_hdr->magic != BENCH_HDR_MAGIC;
  hdr_setup(fresh);
  if (attach_workload())
    bench_die("attach failed");
  /* A pool whose set-up was not complete has run no operation. */
  if (!fresh && resume(why, sizeof why))
    bench_die("%s", why);
  if (fresh) {
    if (atomically(init_workload, NULL, NULL, 0))
      bench_die("init failed");
    hdr_store(&bench_hdr->magic, BENCH_HDR_MAGIC);
  }
  double l0 = now();
  void *scratch = scratch_get(0);
  if (!scratch || (!bench_hdr->loaded && load(scratch)))
    bench_die("load failed");
  scratch_put(scratch);
  double load_s = now() - l0;
  if (opt.load_only) {
    bench_backend.close();
    printf("{\"benchmark\": \"%s\", \"variant\": \"%s\", \"keys\": %" PRIu64
           ", \"load_seconds\": %.3f}\n",
           bench_workload->name, bench_backend.variant, cfg.keys, load_s);
    return 0;
  }

  for (unsigned t = 0; t < cfg.threads; t++) {
    struct worker *w = &workers[t];
    w->id = t;
    w->target = opt.ops / cfg.threads + (t < opt.ops % cfg.threads);
    w->scratch = scratch_get(t);
    if (!w->scratch || pthread_create(&w->tid, NULL, worker_main, w))
      bench_die("cannot start thread %u", t);
  }
  double t0 = now(), t1;
  uint64_t n0 = 0, n1;
  sample(0);
  atomic_store_explicit(&start_flag, 1, memory_order_release);
  if (!opt.ops) {
    sleep_s(opt.warmup);
    n0 = total_ops();
    sample(0);
    t0 = now();
    sleep_s(opt.seconds);
    n1 = total_ops();
    sample(1);
    t1 = now();
    atomic_store(&stop_flag, 1);
  }
  int failed = 0;
  for (unsigned t = 0; t < cfg.threads; t++) {
    pthread_join(workers[t].tid, NULL);
    failed |= workers[t].failed;
    scratch_put(workers[t].scratch);
  }
  if (opt.ops) {
    t1 = now();
    n1 = total_ops();
    sample(1);
  }
  bench_backend.close();
  if (remove_after)
    unlink(path);
  if (failed)
    return 1;
  double secs = t1 - t0;
  char fields[256] = "";
  if (bench_backend.json_fields)
    bench_backend.json_fields(fields, sizeof fields);
  printf("{\"benchmark\": \"%s\", \"variant\": \"%s\", \"threads\": %u, "
         "\"keys\": %" PRIu64 ", \"value_size\": %zu, \"read_pct\": %u, "
         "\"seed\": %" PRIu64 ", \"ops\": %" PRIu64 ", \"seconds\": %.6f, "
         "\"ops_per_sec\": %.1f, \"load_seconds\": %.3f, \"tracing\": %d%s}\n",
         bench_workload->name, bench_backend.variant, cfg.threads, cfg.keys,
         cfg.value_size, cfg.read_pct, cfg.seed, n1 - n0, secs,
         secs > 0 ? (double)(n1 - n0) / secs : 0.0, load_s, pmkit_tracing(),
         fields);
  return 0;
}
