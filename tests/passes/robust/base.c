// SPDX-License-Identifier: Apache-2.0
// pmkit-robust, base setting: a write-back of the written line(s) and an
// sfence after every store, RMW, compare-and-swap, atomic or volatile load and
// memset/memcpy that may touch PM; nothing after DRAM accesses, inside
// PMKIT_ROBUST_IGNORE_BEGIN/END or in a PMKIT_ROBUST_IGNORE function. With
// -pmkit-robust-strip-existing the program's own flushes and fences go
// first. The report names each insertion. Without the pass there is no
// clwb at all (the must-fail half).
//
// RUN: %clang_pm -O1 -g -S -emit-llvm %s -o %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -S %t.ll | %FileCheck %s
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -S %t.ll \
// RUN:   -pmkit-robust-strip-existing | %FileCheck %s --check-prefix=STRIP
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -disable-output %t.ll \
// RUN:   -pmkit-robust-report 2>&1 | %FileCheck %s --check-prefix=REPORT
// RUN: %clang_pm -O1 -S -emit-llvm %s -o - | %not grep -q llvm.x86.clwb
// RUN: %clang_pm -O1 -S -emit-llvm -mllvm -pmkit-mode=robust %s -o - \
// RUN:   | %FileCheck %s --check-prefix=CLANG
// RUN: %not %opt -passes=pmkit-robust -pmkit-robust-setting=fast \
// RUN:   -disable-output %t.ll 2>&1 | %FileCheck %s --check-prefix=SETTING
// SETTING: Cannot find option named 'fast'!

#include <pmkit/annotations.h>
#include <pmkit/pmkit.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

pmkit_pool *pool;
static long dram_counter;

struct rec {
  long a, b;
  _Atomic long flag;
  char blob[100];
};

static struct rec *rec(void) {
  void *p;
  pmkit_root(pool, sizeof(struct rec), &p);
  return p;
}

// CHECK-LABEL: define {{.*}}@plain_stores(
// CHECK: store i64 1, ptr [[R:%[0-9]+]]
// CHECK-NEXT: call void @llvm.x86.clwb(ptr [[R]])
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK: store i64 2, ptr [[B:%[0-9a-z.]+]]
// CHECK-NEXT: call void @llvm.x86.clwb(ptr [[B]])
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK: store i64 {{.*}} @dram_counter
// CHECK-NOT: clwb
// CHECK: ret void
__attribute__((noinline)) void plain_stores(void) {
  struct rec *r = rec();
  // REPORT: pmkit-robust: {{.*}}base.c:[[@LINE+1]]: store to PM (pmkit_root at {{.*}}base.c:{{[0-9]+}}): write-back + sfence
  r->a = 1;
  r->b = 2;
  dram_counter++;
}

// CHECK-LABEL: define {{.*}}@atomics(
// CHECK: load atomic i64
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK: atomicrmw add
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK: cmpxchg
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
__attribute__((noinline)) long atomics(void) {
  struct rec *r = rec();
  long v = atomic_load(&r->flag);
  atomic_fetch_add(&r->flag, 1);
  long e = v + 1;
  atomic_compare_exchange_strong(&r->flag, &e, v + 2);
  return v;
}

// A volatile load reads shared words in pre-C11 lock-free code (and in
// Concurrency Kit built on compiler builtins): an atomic load's treatment.
// CHECK-LABEL: define {{.*}}@volatile_read(
// CHECK: load volatile i64
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
__attribute__((noinline)) long volatile_read(void) {
  struct rec *r = rec();
  // REPORT: pmkit-robust: {{.*}}base.c:[[@LINE+1]]: volatile load from PM (pmkit_root at {{.*}}): write-back + sfence
  return *(volatile long *)&r->a;
}

// CHECK-LABEL: define {{.*}}@copies(
// CHECK: call void @llvm.memset
// CHECK-NEXT: call void @__pmkit_flush_range(ptr {{.*}}, i64 100)
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK: call void @llvm.memcpy
// CHECK-NEXT: call void @__pmkit_flush_range(ptr {{.*}}, i64 %
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
__attribute__((noinline)) void copies(const char *src, size_t n) {
  struct rec *r = rec();
  memset(r->blob, 0, sizeof r->blob);
  memcpy(r->blob, src, n);
}

// CHECK-LABEL: define {{.*}}@ignored_region(
// CHECK: store i64 7
// CHECK-NOT: clwb
// CHECK: store i64 8
// CHECK-NEXT: call void @llvm.x86.clwb
__attribute__((noinline)) void ignored_region(void) {
  struct rec *r = rec();
  PMKIT_ROBUST_IGNORE_BEGIN;
  r->a = 7;
  PMKIT_ROBUST_IGNORE_END;
  r->b = 8;
}

// CHECK-LABEL: define {{.*}}@ignored_function(
// CHECK-NOT: clwb
// CHECK: ret void
PMKIT_ROBUST_IGNORE __attribute__((noinline)) void ignored_function(void) {
  rec()->a = 9;
}

// The program's own flush and fence: kept by default, stripped on request
// (the pass then inserts its own after the store).
// CHECK-LABEL: define {{.*}}@hand_flushed(
// CHECK: call void @pmkit_flush(
// CHECK: call void @pmkit_fence(
// STRIP-LABEL: define {{.*}}@hand_flushed(
// STRIP-NOT: pmkit_flush
// STRIP-NOT: pmkit_fence
// STRIP: store i64 10
// STRIP-NEXT: call void @llvm.x86.clwb
// STRIP-NEXT: call void @llvm.x86.sse.sfence()
// STRIP-NOT: pmkit_f
// STRIP: ret void
__attribute__((noinline)) void hand_flushed(void) {
  struct rec *r = rec();
  r->a = 10;
  pmkit_flush(&r->a, sizeof r->a);
  pmkit_fence();
}

// REPORT: pmkit-robust: {{.*}}base.c:{{[0-9]+}}: memcpy into PM ({{.*}}): range write-back + sfence

// The clang pipeline (pmkit cc --mode=robust) runs the pass after the
// optimizer and marks functions it flushes in with the clwb feature.
// CLANG: call void @llvm.x86.clwb
// CLANG: "target-features"="{{.*}}+clwb
