/* SPDX-License-Identifier: Apache-2.0 */
/*
 * litmus.c -- the explorer's litmus shapes: one tiny persistency pattern per
 * shape (two stores on different lines without a flush, clwb then sfence, a
 * torn 128-byte copy, a second thread persisting what it read, ...), each
 * run on the words of one 64-byte-aligned area of the pool's root:
 *
 *   litmus init POOL          create POOL with a zeroed root (untraced run)
 *   litmus run SHAPE POOL     run SHAPE on POOL (traced under pmkit explore)
 *   litmus check SHAPE POOL   print SHAPE's variables; exit 0 (a checker
 *                             that records its loads: built with
 *                             --trace-loads, for --robustness)
 *   litmus list               the shapes and their variables
 *
 * Compiled with -DPMKIT_CHECK_LIB it is instead the in-process checker for
 * `pmkit explore --check-lib`: it appends the values of SHAPE's variables
 * ($PMKIT_LITMUS_SHAPE) in one line to $PMKIT_LITMUS_OUT and accepts every
 * image, so that the lines are the set of outcomes the explorer produced.
 * tests/cli/test_litmus.py compares that set, per model, with the exact set
 * the model allows.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmkit/pmkit.h"

#define WORDS 64 /* eight lines */
struct root {
  uint64_t raw[WORDS + 8]; /* the area starts at the first line boundary */
};

/* Variables: x and a share line 0, y is on line 1, z on line 2. */
enum { X = 0, A = 1, Y = 8, Z = 16 };

static uint64_t *area_of(void *root) {
  return (uint64_t *)(((uintptr_t)root + 63) & ~(uintptr_t)63);
}

struct shape {
  const char *name;
  const char *vars; /* word indices, comma-separated */
  void (*run)(uint64_t *w);
};

/* DRAM: what the threads of a shape synchronise on. */
static _Atomic uint64_t dram_word;
static _Atomic int flag;

static void wait_flag(int v) {
  while (atomic_load_explicit(&flag, memory_order_acquire) != v)
    ;
}

static void diff_lines(uint64_t *w) {
  w[X] = 1;
  w[Y] = 1;
}
static void same_line(uint64_t *w) {
  w[X] = 1;
  w[A] = 1;
}
static void clwb_sfence(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  _mm_sfence();
  w[Y] = 1;
}
static void clflushopt_sfence(uint64_t *w) {
  w[X] = 1;
  _mm_clflushopt(&w[X]);
  _mm_sfence();
  w[Y] = 1;
}
static void clflush_nofence(uint64_t *w) {
  w[X] = 1;
  _mm_clflush(&w[X]);
  w[Y] = 1;
}
static void clwb_nofence(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  w[Y] = 1;
}
static void clflushopt_nofence(uint64_t *w) {
  w[X] = 1;
  _mm_clflushopt(&w[X]);
  w[Y] = 1;
}
static void mfence_noflush(uint64_t *w) {
  w[X] = 1;
  _mm_mfence();
  w[Y] = 1;
}
static void clwb_mfence(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  _mm_mfence();
  w[Y] = 1;
}
static void clwb_sc_fence(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  atomic_thread_fence(memory_order_seq_cst);
  w[Y] = 1;
}
static void clwb_rmw_pm(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  atomic_fetch_add((_Atomic uint64_t *)&w[Z], 1);
  w[Y] = 1;
}
static void clwb_rmw_dram(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  atomic_fetch_add(&dram_word, 1);
  w[Y] = 1;
}
static void clwb_xchg_pm(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  atomic_store((_Atomic uint64_t *)&w[Z], 1); /* seq_cst: xchg */
  w[Y] = 1;
}
static void clwb_xchg_dram(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  atomic_store(&dram_word, 1); /* seq_cst: xchg */
  w[Y] = 1;
}
static void clwb_cas_fail(uint64_t *w) {
  w[X] = 1;
  _mm_clwb(&w[X]);
  uint64_t expect = 5; /* z is 0: the compare-exchange fails */
  atomic_compare_exchange_strong((_Atomic uint64_t *)&w[Z], &expect, 7);
  w[Y] = 1;
}
static void nt_sfence(uint64_t *w) {
  _mm_stream_si64((long long *)&w[X], 1);
  _mm_sfence();
  w[Y] = 1;
}
static void nt_nofence(uint64_t *w) {
  _mm_stream_si64((long long *)&w[X], 1);
  w[Y] = 1;
}
static void store16_line(uint64_t *w) {
  _mm_storeu_si128((__m128i *)&w[X], _mm_set_epi64x(2, 1));
}
static void store16_cross(uint64_t *w) { /* words 7 and 8: two lines */
  _mm_storeu_si128((__m128i *)&w[7], _mm_set_epi64x(2, 1));
}
static void copy(uint64_t *dst, unsigned n) {
  uint64_t src[16];
  for (unsigned i = 0; i < n; i++)
    src[i] = i + 1;
  __asm__ volatile("" ::"r"(src) : "memory"); /* keep the copy a copy */
  memcpy(dst, src, n * 8);
}
static void memcpy16(uint64_t *w) { copy(&w[X], 2); }
static void memcpy128(uint64_t *w) { copy(&w[X], 16); }
static void memset64(uint64_t *w) { memset(&w[X], 0x11, 64); }
static void same_twice(uint64_t *w) {
  volatile uint64_t *x = &w[X]; /* two stores, not one */
  *x = 1;
  *x = 2;
}
static void store_after_clwb(uint64_t *w) {
  volatile uint64_t *x = &w[X];
  *x = 1;
  _mm_clwb(&w[X]);
  *x = 2;
  _mm_sfence();
  w[Y] = 1;
}
static void clflush_wrong_line(uint64_t *w) {
  w[X] = 1;
  _mm_clflush(&w[Y]);
  w[Y] = 1;
}

/* Two threads: thread 1 stores x (unflushed) and raises the flag; thread 2
 * waits for it, reads x, and persists y (after persisting x when it flushes
 * on read). */
static uint64_t *shared;
static int flush_on_read;
static void *reader(void *arg) {
  (void)arg;
  wait_flag(1);
  if (atomic_load_explicit((_Atomic uint64_t *)&shared[X],
                           memory_order_relaxed) == 1) {
    if (flush_on_read) {
      _mm_clwb(&shared[X]);
      _mm_sfence();
    }
    shared[Y] = 1;
    _mm_clwb(&shared[Y]);
    _mm_sfence();
  }
  return NULL;
}
static void two_threads(uint64_t *w, int flush) {
  shared = w;
  flush_on_read = flush;
  pthread_t t;
  pthread_create(&t, NULL, reader, NULL);
  atomic_store_explicit((_Atomic uint64_t *)&w[X], 1, memory_order_relaxed);
  atomic_store_explicit(&flag, 1, memory_order_release);
  pthread_join(t, NULL);
}
static void read_noflush(uint64_t *w) { two_threads(w, 0); }
static void read_flush(uint64_t *w) { two_threads(w, 1); }

/* Thread 1 writes x back with clwb and no fence of its own; thread 2 fences
 * (which does not order thread 1's clwb) and stores y. */
static void *fencer(void *arg) {
  (void)arg;
  wait_flag(1);
  _mm_sfence();
  shared[Y] = 1;
  _mm_clwb(&shared[Y]);
  _mm_sfence();
  return NULL;
}
static void clwb_other_fence(uint64_t *w) {
  shared = w;
  pthread_t t;
  pthread_create(&t, NULL, fencer, NULL);
  w[X] = 1;
  _mm_clwb(&w[X]);
  atomic_store_explicit(&flag, 1, memory_order_release);
  pthread_join(t, NULL);
}

static const struct shape shapes[] = {
    {"diff_lines", "0,8", diff_lines},
    {"same_line", "0,1", same_line},
    {"clwb_sfence", "0,8", clwb_sfence},
    {"clflushopt_sfence", "0,8", clflushopt_sfence},
    {"clflush_nofence", "0,8", clflush_nofence},
    {"clwb_nofence", "0,8", clwb_nofence},
    {"clflushopt_nofence", "0,8", clflushopt_nofence},
    {"mfence_noflush", "0,8", mfence_noflush},
    {"clwb_mfence", "0,8", clwb_mfence},
    {"clwb_sc_fence", "0,8", clwb_sc_fence},
    {"clwb_rmw_pm", "0,8,16", clwb_rmw_pm},
    {"clwb_rmw_dram", "0,8", clwb_rmw_dram},
    {"clwb_xchg_pm", "0,8,16", clwb_xchg_pm},
    {"clwb_xchg_dram", "0,8", clwb_xchg_dram},
    {"clwb_cas_fail", "0,8,16", clwb_cas_fail},
    {"nt_sfence", "0,8", nt_sfence},
    {"nt_nofence", "0,8", nt_nofence},
    {"store16_line", "0,1", store16_line},
    {"store16_cross", "7,8", store16_cross},
    {"memcpy16", "0,1", memcpy16},
    {"memcpy128", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", memcpy128},
    {"memset64", "0,1,2,3,4,5,6,7", memset64},
    {"same_twice", "0", same_twice},
    {"store_after_clwb", "0,8", store_after_clwb},
    {"clflush_wrong_line", "0,8", clflush_wrong_line},
    {"read_noflush", "0,8", read_noflush},
    {"read_flush", "0,8", read_flush},
    {"clwb_other_fence", "0,8", clwb_other_fence},
};

static const struct shape *find(const char *name) {
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    if (!strcmp(shapes[i].name, name))
      return &shapes[i];
  return NULL;
}

/* One line: the shape's variables' values, comma-separated. */
static int outcome(const struct shape *s, const uint64_t *w, char *out,
                   size_t n) {
  size_t at = 0;
  for (const char *v = s->vars; *v;) {
    char *end;
    unsigned long i = strtoul(v, &end, 10);
    at += (size_t)snprintf(out + at, n - at, "%s%llx", at ? "," : "",
                           (unsigned long long)w[i]);
    v = *end ? end + 1 : end;
  }
  return (int)at;
}

#ifdef PMKIT_CHECK_LIB

__attribute__((visibility("default"))) int pmkit_check(void *pool_base);

int pmkit_check(void *pool_base) {
  const struct shape *s = find(getenv("PMKIT_LITMUS_SHAPE") ?: "");
  const char *path = getenv("PMKIT_LITMUS_OUT");
  pmkit_pool *pool;
  void *root;
  if (!s || !path || pmkit_pool_attach(pool_base, &pool) ||
      pmkit_root(pool, sizeof(struct root), &root))
    return 2;
  char line[512];
  int n = outcome(s, area_of(root), line, sizeof line - 1);
  line[n++] = '\n';
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0 || write(fd, line, (size_t)n) != n)
    return 2;
  close(fd);
  pmkit_pool_close(pool);
  return 0;
}

#else

int main(int argc, char **argv) {
  pmkit_pool *pool;
  void *root;
  if (argc == 2 && !strcmp(argv[1], "list")) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      printf("%s %s\n", shapes[i].name, shapes[i].vars);
    return 0;
  }
  if (argc == 3 && !strcmp(argv[1], "init")) {
    pmkit_pool_opts o = {.layout = "litmus"};
    if (pmkit_pool_create(argv[2], 4u << 20, &o, &pool) ||
        pmkit_root(pool, sizeof(struct root), &root))
      return 2;
    pmkit_pool_close(pool);
    return 0;
  }
  const struct shape *s = argc == 4 ? find(argv[2]) : NULL;
  int check = s && !strcmp(argv[1], "check");
  if (!s || (!check && strcmp(argv[1], "run"))) {
    fprintf(stderr, "usage: litmus init POOL | run|check SHAPE POOL | list\n");
    return 2;
  }
  pmkit_pool_opts o = {.layout = "litmus"};
  if (pmkit_pool_open(argv[3], &o, &pool) ||
      pmkit_root(pool, sizeof(struct root), &root)) {
    fprintf(stderr, "litmus: %s\n", pmkit_errormsg());
    return 2;
  }
  if (check) {
    char line[512];
    outcome(s, area_of(root), line, sizeof line);
    puts(line);
  } else {
    s->run(area_of(root));
  }
  pmkit_pool_close(pool);
  return 0;
}

#endif
