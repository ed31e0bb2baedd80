// SPDX-License-Identifier: Apache-2.0
// Each step of the pmkit-ssapp pass on the IR, for small FASEs: the set-up
// (frame, arguments, begin); a read RISE (torn bit flipped, buoy, the loaded
// value in two torn-bit slots of 32 bits each: load-to-persist) and a write
// RISE (buoy, the store), each ended by an sfence; the exit RISE; the
// recovery version's switch (2R: at RISE R, 2R+1: after read RISE R); an
// atomic compare-exchange as one tagged-RMW call with the read of its word
// masked; a memmove through the thread's buffer; and the compiler-barrier
// setting.
//
// RUN: %clang_pm -O1 -mllvm -pmkit-mode=ssapp -S -emit-llvm %s -o - \
// RUN:   | %FileCheck %s
// RUN: %clang_pm -O1 -mllvm -pmkit-mode=ssapp -mllvm -pmkit-ssapp-fence=compiler \
// RUN:   -S -emit-llvm %s -o - | %FileCheck %s --check-prefix=COMPILER
#include <pmkit/pmkit.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

struct node {
  struct node *next;
  uint64_t v;
};

// The table, one entry per FASE: its recovery version, frame bytes, RISEs.
// CHECK: @__pmkit_ssapp_table = internal constant [3 x {{.*}}] [{{.*}} ptr @incr.ssapp.recover, i32 64, i32 3,
// CHECK-LABEL: define {{.*}}void @incr(ptr
// CHECK: [[FRAME:%[0-9]+]] = call ptr @__pmkit_ssapp_enter(i64 {{-?[0-9]+}}, ptr [[X:%[0-9]+]])
// CHECK: call void @__pmkit_ssapp_check_ptr(ptr [[X]], i32 1)
// CHECK: store ptr [[X]], ptr
// CHECK: call void @__pmkit_ssapp_begin()
// The read RISE: flip, buoy 1 with the bit, the flipper, a compiler barrier.
// CHECK: [[OLD:%[0-9]+]] = load volatile i64, ptr [[FLIP:%[0-9]+]]
// CHECK: [[X1:%[0-9]+]] = xor i64 [[OLD]], -9223372036854775808
// CHECK: [[T:%[0-9]+]] = and i64 [[X1]], -9223372036854775808
// CHECK: [[B:%[0-9]+]] = or i64 1, [[T]]
// CHECK: store volatile i64 [[B]], ptr [[FRAME]]
// CHECK: store volatile i64 [[T]], ptr [[FLIP]]
// CHECK: fence syncscope("singlethread") seq_cst
// CHECK: load i64, ptr
// Both halves of the value with the torn bit.
// CHECK: [[LO:%[0-9]+]] = or i64 {{%[0-9]+}}, [[T]]
// CHECK: store i64 [[LO]], ptr
// CHECK: [[HI:%[0-9]+]] = or i64 {{%[0-9]+}}, [[T]]
// CHECK: store i64 [[HI]], ptr
// CHECK: call void @llvm.x86.sse.sfence()
// The write RISE: buoy 2, the program's store, no torn bits.
// CHECK: store volatile i64 2, ptr [[FRAME]]
// CHECK: store i64 {{%[0-9]+}}, ptr {{%[0-9]+}}, align 8, !tbaa
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK: store volatile i64 3, ptr [[FRAME]]
// CHECK: call void @__pmkit_ssapp_exit()
// CHECK: ret void
PMKIT_FASE void incr(uint64_t *x) { *x += 1; }

// CHECK-LABEL: define {{.*}}void @push(ptr
// The word the CAS tags is read masked, the CAS is one runtime call.
// CHECK: and i64 {{%[0-9]+}}, 281474976710655
// CHECK: call i64 @__pmkit_ssapp_rmw(ptr {{%[0-9]+}}, i32 1, i64 {{%[0-9]+}}, i64 {{%[0-9]+}})
PMKIT_FASE void push(struct node *_Atomic *top, struct node *n) {
  struct node *t = atomic_load(top);
  do
    n->next = t;
  while (!atomic_compare_exchange_weak(top, &t, n));
}

// CHECK-LABEL: define {{.*}}void @shift(ptr
// CHECK: call void @__pmkit_ssapp_copy_in(ptr {{%[0-9]+}}, i64 {{%[0-9]+}}, ptr {{%[0-9]+}}, i64 [[T2:%[0-9]+]])
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK: call void @__pmkit_ssapp_copy_out(ptr {{%[0-9]+}}, i64 {{%[0-9]+}})
PMKIT_FASE void shift(uint64_t *a, uint64_t n) { memmove(a + 1, a, n * 8); }

// The recovery version of incr: at RISE 1 (2), after it (3) or at RISE 2
// (4) -- both the write RISE -- and at the exit RISE (6).
// CHECK-LABEL: define internal void @incr.ssapp.recover(ptr %0, i64 %1)
// CHECK: switch i64 %1, label %{{[0-9]+}} [
// CHECK-NEXT: i64 2, label %[[R1:[0-9]+]]
// CHECK-NEXT: i64 3, label %[[R2:[0-9]+]]
// CHECK-NEXT: i64 4, label %[[R2]]
// CHECK-NEXT: i64 6, label %{{[0-9]+}}
// CHECK-NEXT: ]
// CHECK: unreachable

// A constructor registers the table.
// CHECK: call void @__pmkit_ssapp_register(ptr @__pmkit_ssapp_table, i32 3)

// COMPILER-LABEL: define {{.*}}void @incr(ptr
// COMPILER-NOT: sfence
// COMPILER: store volatile i64 2
// COMPILER: fence syncscope("singlethread") seq_cst
// COMPILER-LABEL: define {{.*}}void @push(
