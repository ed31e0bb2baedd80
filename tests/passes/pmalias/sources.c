// SPDX-License-Identifier: Apache-2.0
// pmkit-pmalias: where persistent memory comes from, and what it reaches.
// Each function stores a distinct constant; the printer must call the store
// PM or DRAM and, for PM, name the source. Field-sensitivity: a DRAM struct
// holding one PM and one DRAM pointer keeps them apart. The must-fail half:
// the same checks against the analysis with every source marked DRAM would
// not hold, so each PM line is checked with its source text.
//
// RUN: %clang_pm -O1 -g -S -emit-llvm %s -o %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-pmalias -disable-output %t.ll \
// RUN:   | %FileCheck %s
// RUN: printf 'cfg_alloc return\n# comment\ncfg_out out 1\n' > %t.cfg
// RUN: %opt -passes=pmkit-annotations,pmkit-pmalias -disable-output \
// RUN:   -pmkit-pmalias-config=%t.cfg %t.ll | %FileCheck %s --check-prefix=CFG
// A configured allocator the module defines, and an annotated one without
// noinline: through clang -O2 with the plugin (pipeline-start annotations
// keep both calls), the analysis sees the calls and takes the user's word.
// RUN: printf 'cfg_defined return\n' > %t.cfg2
// RUN: %clang_pm -O2 -g -S -emit-llvm -mllvm -pmkit-pmalias-config=%t.cfg2 %s -o %t2.ll
// RUN: %opt -passes=pmkit-pmalias -disable-output -pmkit-pmalias-config=%t.cfg2 \
// RUN:   %t2.ll | %FileCheck %s --check-prefix=KEEP
// RUN: printf 'cfg_alloc sideways\n' > %t.bad
// RUN: %not %opt -passes=pmkit-pmalias -disable-output \
// RUN:   -pmkit-pmalias-config=%t.bad %t.ll 2>&1 | %FileCheck %s --check-prefix=BAD
// BAD: {{.*}}.bad:1: expected '<function> return' or '<function> out <index>', found 'cfg_alloc sideways'

#include <pmkit/annotations.h>
#include <pmkit/pmkit.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

pmkit_pool *pool;
long global_array[8];
void sink(void *);
void *cfg_alloc(size_t);
void cfg_out(size_t, void **);

// CHECK: from_pool: PM {{.*}}store i64 101{{.*}}; pmkit_alloc at {{.*}}sources.c:[[@LINE+3]]
__attribute__((noinline)) long *from_pool(void) {
  long *p;
  if (pmkit_alloc(pool, 64, (void **)&p))
    return 0;
  p[1] = 101;
  return p;
}

// CHECK: on_heap: DRAM {{.*}}store i64 102
__attribute__((noinline)) void on_heap(void) {
  long *p = malloc(64);
  p[2] = 102;
  sink(p);
}

// CHECK: on_global: DRAM {{.*}}store i64 103
__attribute__((noinline)) void on_global(int i) { global_array[i] = 103; }

// CHECK: on_stack: DRAM {{.*}}store i64 104
__attribute__((noinline)) void on_stack(int i) {
  long a[8];
  a[i] = 104;
  sink(a);
}

// A parameter of an exported function: callers elsewhere may pass PM.
// CHECK: exported: PM {{.*}}store i64 105{{.*}}; unknown memory
__attribute__((noinline)) void exported(long *p) { *p = 105; }

// An internal function sees only what its callers pass: here DRAM only.
// CHECK: fill_dram: DRAM {{.*}}store i64 106
static __attribute__((noinline)) void fill_dram(long *p) { *p = 106; }
__attribute__((noinline)) void call_fill(void) {
  long *p = malloc(8);
  fill_dram(p);
  sink(p);
}

// A DRAM struct holding a PM and a DRAM pointer, stored and loaded back.
struct holder {
  long *dram;
  long *pm;
};
static struct holder h; // static: no other unit writes it
// CHECK: through_memory: DRAM {{.*}}store i64 107
// CHECK: through_memory: PM {{.*}}store i64 108{{.*}}; pmkit_zalloc at
__attribute__((noinline)) void through_memory(void) {
  h.dram[0] = 107;
  h.pm[0] = 108;
}
__attribute__((noinline)) void setup_holder(void) {
  h.dram = malloc(8);
  pmkit_zalloc(pool, 8, (void **)&h.pm);
}

// CHECK: mapped: PM {{.*}}store i64 109{{.*}}; mmap of a file
// CHECK: mapped: DRAM {{.*}}store i64 110
__attribute__((noinline)) void mapped(int fd) {
  long *f = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  long *a =
      mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  f[0] = 109;
  a[0] = 110;
}

// A function the user declares a PM allocator (the annotation).
PMKIT_PM_ALLOCATOR __attribute__((noinline)) void *my_alloc(size_t n) {
  return malloc(n);
}
// CHECK: annotated: PM {{.*}}store i64 111{{.*}}; PM allocator my_alloc
__attribute__((noinline)) void annotated(void) {
  long *p = my_alloc(8);
  *p = 111;
}

// Allocators listed in the configuration file. Without it, an unknown
// function's result is unknown memory (also PM, but for no known reason).
// CHECK: configured: PM {{.*}}store i64 112{{.*}}; unknown memory
// CFG: configured: PM {{.*}}store i64 112{{.*}}; cfg_alloc at
// CFG: configured: PM {{.*}}store i64 113{{.*}}; cfg_out at
__attribute__((noinline)) void configured(void) {
  long *p = cfg_alloc(8), *q;
  *p = 112;
  cfg_out(8, (void **)&q);
  *q = 113;
}

// KEEP: defined_cfg: PM {{.*}}store i64 130{{.*}}; cfg_defined at
// KEEP: inlinable_annotated: PM {{.*}}store i64 131{{.*}}; PM allocator small_alloc
// CHECK: defined_cfg: DRAM {{.*}}store i64 130
void *cfg_defined(size_t n) { return malloc(n); }
PMKIT_PM_ALLOCATOR void *small_alloc(size_t n) { return malloc(n); }
__attribute__((noinline)) void defined_cfg(void) {
  long *p = cfg_defined(8);
  *p = 130;
  sink(p);
}
__attribute__((noinline)) void inlinable_annotated(void) {
  long *p = small_alloc(8);
  *p = 131;
  sink(p);
}

// A call through a function pointer reaches the functions the pointer may
// hold: here only DRAM is passed, so the callee's store is DRAM.
// CHECK: through_ptr: DRAM {{.*}}store i64 114
static __attribute__((noinline)) void through_ptr(long *p) { *p = 114; }
static void (*volatile fp)(long *);
__attribute__((noinline)) void call_through(void) {
  long *d = malloc(8);
  fp = through_ptr;
  fp(d);
  sink(d);
}

// A thread-local variable is DRAM (its address comes from an intrinsic).
// CHECK: tls: DRAM {{.*}}store i64 115
static __thread long tls_counter;
__attribute__((noinline)) void tls(void) { tls_counter = 115; }

// pthread_create(start, arg) calls start(arg): a PM argument makes the
// thread's stores PM, a DRAM one leaves them DRAM.
// CHECK: pm_worker: PM {{.*}}store i64 116{{.*}}; pmkit_alloc at
// CHECK: dram_worker: DRAM {{.*}}store i64 117
static void *pm_worker(void *arg) {
  ((long *)arg)[0] = 116;
  return 0;
}
static void *dram_worker(void *arg) {
  ((long *)arg)[0] = 117;
  return 0;
}
__attribute__((noinline)) void spawn(void) {
  pthread_t a, b;
  pthread_create(&a, 0, pm_worker, from_pool());
  pthread_create(&b, 0, dram_worker, malloc(8));
}

// A function handed to unknown code may be called with anything.
// CHECK: callback: PM {{.*}}store i64 118{{.*}}; unknown memory
void register_callback(void (*)(long *));
static void callback(long *p) { *p = 118; }
__attribute__((noinline)) void hand_over(void) { register_callback(callback); }
