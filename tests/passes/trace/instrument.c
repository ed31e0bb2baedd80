// SPDX-License-Identifier: Apache-2.0
// What pmkit-trace instruments, on the IR: PM stores behind the inline
// bounding-box test, non-temporal stores, memcpy/memset, flush intrinsics
// and inline asm (mnemonic and .byte forms), fences, and atomics bracketed
// by begin/end; stack and global accesses are left alone. Without
// -pmkit-trace nothing is added (the must-fail half).
//
// RUN: %clang_pm -O1 -fno-discard-value-names -mllvm -pmkit-trace \
// RUN:   -S -emit-llvm %s -o %t.ll
// RUN: %FileCheck %s < %t.ll
// RUN: %FileCheck %s --check-prefix=CTOR < %t.ll
// RUN: %clang_pm -O0 -mllvm -pmkit-trace -S -emit-llvm %s -o - \
// RUN:   | %FileCheck %s --check-prefix=O0
// RUN: %clang_pm -O1 -fno-discard-value-names -S -emit-llvm %s -o - \
// RUN:   | %not %FileCheck %s
// RUN: %clang_pm -O1 -fno-discard-value-names -mllvm -pmkit-trace \
// RUN:   -mllvm -pmkit-trace-loads -S -emit-llvm %s -o - \
// RUN:   | %FileCheck %s --check-prefix=LOADS
#include <immintrin.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

struct rec {
  uint64_t a;
  uint64_t b;
  char v[32];
};
uint64_t global_counter;

// CHECK-LABEL: define{{.*}} void @stores(
// CHECK: %[[LO:.*]] = load i64, ptr @__pmkit_pool_lo
// CHECK: icmp uge
// CHECK: call void @__pmkit_trace_store(ptr %{{.*}}, i64 %x, i32 8, i32 {{-?[0-9]+}})
// CHECK: store i64 %x
// CHECK: call void @__pmkit_trace_write(ptr {{.*}}, ptr %s, i64 32,
// CHECK: call void @llvm.memcpy
// CHECK: call void @__pmkit_trace_memset(ptr {{.*}}, i32 0, i64 %{{.*}},
// CHECK-NOT: __pmkit_trace_store(ptr @global_counter
// CHECK: ret void
void stores(struct rec *r, const char *s, uint64_t x) {
  uint64_t local[4];
  r->a = x;
  memcpy(r->v, s, 32);
  memset(r->v, 0, x & 31);
  global_counter = x;
  local[x & 3] = x;
  __asm__ volatile("" ::"r"(local) : "memory");
}

// CHECK-LABEL: define{{.*}} void @flushes(
// CHECK: call void @__pmkit_trace_flush(ptr %r, i32 1,
// CHECK-NEXT: call void @llvm.x86.sse2.clflush(ptr
// CHECK: call void @__pmkit_trace_flush(ptr %r, i32 3,
// CHECK-NEXT: call void asm sideeffect ".byte 0x66, 0x0f, 0xae, 0x30"
// CHECK: call void @__pmkit_trace_flush(ptr %r, i32 2,
// CHECK-NEXT: call void asm sideeffect "clflushopt
// CHECK: call void @__pmkit_trace_fence(i32 1,
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK: call void @__pmkit_trace_fence(i32 2,
// CHECK-NEXT: fence seq_cst
// CHECK: call void @__pmkit_trace_fence(i32 1,
// CHECK-NEXT: call void asm sideeffect "sfence"
void flushes(struct rec *r) {
  _mm_clflush(r);
  __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x30" ::"a"(r) : "memory");
  __asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)r));
  _mm_sfence();
  atomic_thread_fence(memory_order_seq_cst);
  __asm__ volatile("sfence" ::: "memory");
}

// CHECK-LABEL: define{{.*}} void @atomics(
// CHECK: %[[T1:.*]] = call i32 @__pmkit_trace_atomic_begin(ptr %p)
// CHECK-NEXT: %[[OLD:.*]] = atomicrmw add ptr %p, i64 2 seq_cst
// CHECK-NEXT: %[[NEW:.*]] = add i64 %[[OLD]], 2
// CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 %[[T1]], ptr %p, i64 %[[NEW]], i32 8, i32 3,
// CHECK: call i32 @__pmkit_trace_atomic_begin(ptr %p)
// CHECK-NEXT: %[[CX:.*]] = cmpxchg ptr %p
// CHECK: %[[OK:.*]] = extractvalue { i64, i1 } %[[CX]], 1
// CHECK-NEXT: %[[KIND:.*]] = select i1 %[[OK]], i32 3, i32 6
// CHECK: call void @__pmkit_trace_atomic_end({{.*}}, i32 %[[KIND]],
// CHECK: call void @__pmkit_trace_atomic_end({{.*}}, i32 1,
// CHECK: call void @__pmkit_trace_ntstore(ptr %{{.*}}, i64 7, i32 8,
// CHECK: store i64 7, {{.*}} !nontemporal
void atomics(_Atomic uint64_t *p, uint64_t *q) {
  atomic_fetch_add(p, 2);
  uint64_t e = 0;
  atomic_compare_exchange_strong(p, &e, 5);
  atomic_store_explicit(p, 9, memory_order_release);
  _mm_stream_si64((long long *)q, 7);
}

// The module registers its source locations.
// CTOR: @llvm.global_ctors = {{.*}}@pmkit.trace.ctor
// CTOR: define internal void @pmkit.trace.ctor()
// CTOR-NEXT: call void @__pmkit_trace_locs(ptr @pmkit.trace.locs, i32

// O0-LABEL: define{{.*}} void @stores(
// O0: call void @__pmkit_trace_store(
// O0-LABEL: define{{.*}} void @flushes(
// O0: call void @__pmkit_trace_flush(

// LOADS-LABEL: define{{.*}} i64 @load_it(
// LOADS: %[[V:.*]] = load i64, ptr %r
// LOADS: call void @__pmkit_trace_load(ptr %r, i64 %[[V]], i32 8,
uint64_t load_it(struct rec *r) { return r->a; }

// Only a real lock prefix counts as a fence (reported after it): the register
// xchg of cpuid.h does not, nor does a word that merely contains "lock".
// CHECK-LABEL: define{{.*}} void @locked(
// CHECK: call void asm sideeffect "lock; addl $$0, (%rsp)"
// CHECK-NEXT: call void @__pmkit_trace_fence(i32 3,
// CHECK-NOT: __pmkit_trace_fence
// CHECK: ret void
void locked(void) {
  __asm__ volatile("lock; addl $0, (%%rsp)" ::: "memory", "cc");
  unsigned a = 0, b;
  __asm__ volatile("xchgq %%rbx, %q1" : "+a"(a), "=&r"(b));
  __asm__ volatile("# clock tick" ::: "memory");
}
