/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_alloc.c -- allocator throughput: alloc+free pairs per second of one
 * allocator, for one block size and thread count. Each of T threads repeats
 * "allocate a batch of B blocks of S bytes, write and read back each block's
 * first word, free them all in allocation order" for a short warm-up and then
 * for D seconds; the main thread samples every thread's iteration counter at
 * the start and end of the timed window. Variants: pmkit (pmkit_alloc and
 * pmkit_free on a pool file in --pool-dir; the persistence domain comes from
 * PMKIT_DOMAIN), glibc (malloc/free), pmdk (pmemobj_alloc/pmemobj_free, all
 * threads on one pool; set PMEM_IS_PMEM_FORCE=1 on a tmpfs pool or libpmem
 * msyncs on every persist). Pool files are removed before exit. Prints one
 * JSON object on stdout; bench/run.py is the harness that runs it.
 * `bench_alloc --info` prints what the harness records about the setup
 * instead: pmkit's domain and flush instruction, and the PMDK version.
 * Usage: bench_alloc --variant pmkit|glibc|pmdk [--threads T] [--size S]
 *        [--seconds D] [--warmup W] [--batch B] [--pool-dir DIR]
 *        [--pool-mib M]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libpmemobj.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pmkit/pmkit.h"

#ifndef BENCH_PMDK_VERSION /* set by CMake from pkg-config */
#define BENCH_PMDK_VERSION "unknown"
#endif

#define MAX_THREADS 64
#define MAX_BATCH 4096

enum variant { V_PMKIT, V_GLIBC, V_PMDK };
static const char *const variant_names[] = {"pmkit", "glibc", "pmdk"};

static struct {
  enum variant variant;
  unsigned threads, batch;
  size_t size, pool_mib;
  double seconds, warmup;
  const char *pool_dir;
} opt = {V_PMKIT, 1, 64, 64, 256, 1.0, 0.2, "/dev/shm"};

static pmkit_pool *pk_pool;
static PMEMobjpool *pmdk_pool;
static char pool_path[4096];

static atomic_int start_flag, stop_flag;

/* One per thread, on its own cache line so the counter the main thread
 * samples does not share a line with another thread's hot data. */
struct worker {
  _Alignas(64) _Atomic uint64_t iters;
  uint64_t sink;
  int failed;
  pthread_t tid;
  _Alignas(64) char pad[1];
};
static struct worker workers[MAX_THREADS];

static _Noreturn void die(const char *fmt, const char *arg) {
  fprintf(stderr, "bench_alloc: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  if (pool_path[0])
    unlink(pool_path);
  exit(1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) && errno == EINTR)
    ;
}

/* The three loops are written out separately so each inlines its own calls
 * and none pays for a per-call variant switch. The store and load through
 * each block keep the compiler from eliding a malloc/free pair and touch the
 * memory as a program would. */
static void *run_pmkit(struct worker *w) {
  void *p[MAX_BATCH];
  uint64_t sum = 0;
  while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
    for (unsigned i = 0; i < opt.batch; i++) {
      if (pmkit_alloc(pk_pool, opt.size, &p[i])) {
        fprintf(stderr, "bench_alloc: pmkit_alloc: %s\n", pmkit_errormsg());
        w->failed = 1;
        return NULL;
      }
      *(volatile uint64_t *)p[i] = i;
    }
    for (unsigned i = 0; i < opt.batch; i++) {
      sum += *(volatile uint64_t *)p[i];
      if (pmkit_free(pk_pool, p[i])) {
        fprintf(stderr, "bench_alloc: pmkit_free: %s\n", pmkit_errormsg());
        w->failed = 1;
        return NULL;
      }
    }
    atomic_store_explicit(&w->iters, w->iters + 1, memory_order_relaxed);
  }
  w->sink = sum;
  return NULL;
}

static void *run_glibc(struct worker *w) {
  void *p[MAX_BATCH];
  uint64_t sum = 0;
  while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
    for (unsigned i = 0; i < opt.batch; i++) {
      p[i] = malloc(opt.size);
      if (!p[i]) {
        fprintf(stderr, "bench_alloc: malloc failed\n");
        w->failed = 1;
        return NULL;
      }
      *(volatile uint64_t *)p[i] = i;
    }
    for (unsigned i = 0; i < opt.batch; i++) {
      sum += *(volatile uint64_t *)p[i];
      free(p[i]);
    }
    atomic_store_explicit(&w->iters, w->iters + 1, memory_order_relaxed);
  }
  w->sink = sum;
  return NULL;
}

static void *run_pmdk(struct worker *w) {
  PMEMoid oid[MAX_BATCH];
  uint64_t sum = 0;
  while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
    for (unsigned i = 0; i < opt.batch; i++) {
      if (pmemobj_alloc(pmdk_pool, &oid[i], opt.size, 0, NULL, NULL)) {
        fprintf(stderr, "bench_alloc: pmemobj_alloc: %s\n", pmemobj_errormsg());
        w->failed = 1;
        return NULL;
      }
      *(volatile uint64_t *)pmemobj_direct(oid[i]) = i;
    }
    for (unsigned i = 0; i < opt.batch; i++) {
      sum += *(volatile uint64_t *)pmemobj_direct(oid[i]);
      pmemobj_free(&oid[i]);
    }
    atomic_store_explicit(&w->iters, w->iters + 1, memory_order_relaxed);
  }
  w->sink = sum;
  return NULL;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  while (!atomic_load_explicit(&start_flag, memory_order_acquire))
    ;
  switch (opt.variant) {
  case V_PMKIT:
    return run_pmkit(w);
  case V_GLIBC:
    return run_glibc(w);
  case V_PMDK:
    return run_pmdk(w);
  }
  return NULL;
}

static _Noreturn void usage(int code) {
  fprintf(code ? stderr : stdout,
          "usage: bench_alloc --info\n"
          "       bench_alloc --variant pmkit|glibc|pmdk [--threads T] "
          "[--size BYTES]\n"
          "       [--seconds D] [--warmup W] [--batch B] [--pool-dir DIR] "
          "[--pool-mib M]\n");
  exit(code);
}

static unsigned long parse_ul(const char *name, const char *v, unsigned long lo,
                              unsigned long hi) {
  char *end;
  errno = 0;
  unsigned long x = strtoul(v, &end, 10);
  if (errno || *end || !*v || x < lo || x > hi) {
    fprintf(stderr, "bench_alloc: %s %s: expected an integer in [%lu, %lu]\n",
            name, v, lo, hi);
    exit(2);
  }
  return x;
}

static double parse_d(const char *name, const char *v) {
  char *end;
  double x = strtod(v, &end);
  if (*end || !*v || !(x >= 0.0 && x <= 3600.0)) {
    fprintf(stderr, "bench_alloc: %s %s: expected seconds in [0, 3600]\n", name,
            v);
    exit(2);
  }
  return x;
}

static void print_info(void) {
  printf("{\"pmkit_domain\": \"%s\", \"pmkit_flush\": \"%s\", "
         "\"pmdk_version\": \"%s\", \"pmemobj_api\": \"%d.%d\"}\n",
         pmkit_domain() == PMKIT_DOMAIN_EADR ? "eadr" : "adr",
         pmkit_flush_name(pmkit_flush_kind()), BENCH_PMDK_VERSION,
         PMEMOBJ_MAJOR_VERSION, PMEMOBJ_MINOR_VERSION);
  exit(0);
}

static void parse_args(int argc, char **argv) {
  int have_variant = 0;
  if (argc == 2 && !strcmp(argv[1], "--info"))
    print_info();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
      usage(0);
    if (i + 1 >= argc)
      usage(2);
    const char *v = argv[++i];
    if (!strcmp(a, "--variant")) {
      unsigned k;
      for (k = 0; k < 3 && strcmp(v, variant_names[k]); k++)
        ;
      if (k == 3)
        usage(2);
      opt.variant = (enum variant)k;
      have_variant = 1;
    } else if (!strcmp(a, "--threads")) {
      opt.threads = (unsigned)parse_ul(a, v, 1, MAX_THREADS);
    } else if (!strcmp(a, "--size")) {
      opt.size = parse_ul(a, v, 8, 1ul << 20);
    } else if (!strcmp(a, "--batch")) {
      opt.batch = (unsigned)parse_ul(a, v, 1, MAX_BATCH);
    } else if (!strcmp(a, "--pool-mib")) {
      opt.pool_mib = parse_ul(a, v, 8, 1ul << 20);
    } else if (!strcmp(a, "--seconds")) {
      opt.seconds = parse_d(a, v);
    } else if (!strcmp(a, "--warmup")) {
      opt.warmup = parse_d(a, v);
    } else if (!strcmp(a, "--pool-dir")) {
      opt.pool_dir = v;
    } else {
      usage(2);
    }
  }
  if (!have_variant)
    usage(2);
}

static void open_pool(void) {
  if (opt.variant == V_GLIBC)
    return;
  snprintf(pool_path, sizeof pool_path, "%s/bench_alloc.%ld.%s.pool",
           opt.pool_dir, (long)getpid(), variant_names[opt.variant]);
  unlink(pool_path); /* a stale file of a killed run with our pid */
  size_t bytes = opt.pool_mib << 20;
  if (opt.variant == V_PMKIT) {
    if (pmkit_pool_create(pool_path, bytes, NULL, &pk_pool))
      die("pmkit_pool_create: %s", pmkit_errormsg());
  } else {
    pmdk_pool = pmemobj_create(pool_path, "bench_alloc", bytes, 0600);
    if (!pmdk_pool)
      die("pmemobj_create: %s", pmemobj_errormsg());
  }
}

static void close_pool(void) {
  if (pk_pool)
    pmkit_pool_close(pk_pool);
  if (pmdk_pool)
    pmemobj_close(pmdk_pool);
  if (pool_path[0])
    unlink(pool_path);
}

static uint64_t total_iters(void) {
  uint64_t n = 0;
  for (unsigned t = 0; t < opt.threads; t++)
    n += atomic_load_explicit(&workers[t].iters, memory_order_relaxed);
  return n;
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  open_pool();

  for (unsigned t = 0; t < opt.threads; t++)
    if (pthread_create(&workers[t].tid, NULL, worker_main, &workers[t]))
      die("pthread_create failed%s", "");
  atomic_store_explicit(&start_flag, 1, memory_order_release);
  sleep_s(opt.warmup);
  uint64_t n0 = total_iters();
  double t0 = now();
  sleep_s(opt.seconds);
  uint64_t n1 = total_iters();
  double t1 = now();
  atomic_store(&stop_flag, 1);
  int failed = 0;
  for (unsigned t = 0; t < opt.threads; t++) {
    pthread_join(workers[t].tid, NULL);
    failed |= workers[t].failed;
  }
  close_pool();
  if (failed)
    return 1;

  uint64_t pairs = (n1 - n0) * opt.batch;
  double secs = t1 - t0;
  printf("{\"variant\": \"%s\", \"threads\": %u, \"size\": %zu, "
         "\"batch\": %u, \"pairs\": %llu, \"seconds\": %.6f, "
         "\"pairs_per_sec\": %.1f",
         variant_names[opt.variant], opt.threads, opt.size, opt.batch,
         (unsigned long long)pairs, secs, (double)pairs / secs);
  if (opt.variant == V_PMKIT)
    printf(", \"domain\": \"%s\", \"flush\": \"%s\"",
           pmkit_domain() == PMKIT_DOMAIN_EADR ? "eadr" : "adr",
           pmkit_flush_name(pmkit_flush_kind()));
  if (opt.variant == V_PMDK) {
    const char *f = getenv("PMEM_IS_PMEM_FORCE");
    printf(", \"pmem_is_pmem_force\": \"%s\"", f ? f : "");
  }
  printf("}\n");
  return 0;
}
