// SPDX-License-Identifier: Apache-2.0
// pmkit-trace judges inline asm by its machine code (Common/PersistOps.h):
// the template is assembled with its operands and the bytes decoded again.
// So the pre-clwb spellings that code for old assemblers uses are what they
// encode -- ".byte 0x66; xsaveopt" is clwb, ".byte 0x66; clflush" is
// clflushopt, never the clflush the text names, which would persist at
// once -- each flush is reported at the operand that holds its address,
// lfence and comments are nothing, and an xchg fences only with a memory
// operand. Without -pmkit-trace nothing is added (the must-fail half).
//
// RUN: %clang_pm -O1 -fno-discard-value-names -mllvm -pmkit-trace \
// RUN:   -S -emit-llvm %s -o %t.ll
// RUN: %FileCheck %s < %t.ll
// RUN: %clang_pm -O1 -fno-discard-value-names -S -emit-llvm %s -o - \
// RUN:   | %not %FileCheck %s
#include <stdint.h>

// PMDK's spelling of clwb for assemblers without it: 66 0f ae /6.
// CHECK-LABEL: define{{.*}} void @clwb_as_xsaveopt(
// CHECK: call void @__pmkit_trace_flush(ptr %p, i32 3,
// CHECK-NEXT: call void asm sideeffect ".byte 0x66; xsaveopt $0"
// CHECK-NOT: __pmkit_trace
// CHECK: ret void
void clwb_as_xsaveopt(char *p) {
  __asm__ volatile(".byte 0x66; xsaveopt %0" : "+m"(*(volatile char *)p));
}

// ... and of clflushopt: 66 0f ae /7. Not a clflush (kind 1).
// CHECK-LABEL: define{{.*}} void @clflushopt_as_clflush(
// CHECK: call void @__pmkit_trace_flush(ptr %p, i32 2,
// CHECK-NEXT: call void asm sideeffect ".byte 0x66; clflush $0"
// CHECK-NOT: __pmkit_trace
// CHECK: ret void
void clflushopt_as_clflush(char *p) {
  __asm__ volatile(".byte 0x66; clflush %0" : "+m"(*(volatile char *)p));
}

// The same with a register operand, and fully hand-encoded with the address
// in a register the constraint fixes: clwb (%rax), clflushopt (%rdi).
// CHECK-LABEL: define{{.*}} void @encoded(
// CHECK: call void @__pmkit_trace_flush(ptr %p, i32 3,
// CHECK-NEXT: call void asm sideeffect ".byte 0x66; xsaveopt ($0)"
// CHECK: call void @__pmkit_trace_flush(ptr %q, i32 3,
// CHECK-NEXT: call void asm sideeffect ".byte 0x66, 0x0f, 0xae, 0x30"
// CHECK: call void @__pmkit_trace_flush(ptr %p, i32 2,
// CHECK-NEXT: call void asm sideeffect ".byte 0x66, 0x0f, 0xae, 0x3f"
// CHECK-NOT: __pmkit_trace
// CHECK: ret void
void encoded(char *p, char *q) {
  __asm__ volatile(".byte 0x66; xsaveopt (%0)" ::"r"(p) : "memory");
  __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x30" ::"a"(q) : "memory");
  __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x3f" ::"D"(p) : "memory");
}

// Mnemonics as before, with the right operand of several and a
// displacement; flushes and fences in the order they execute.
// CHECK-LABEL: define{{.*}} void @mnemonics(
// CHECK: call void @__pmkit_trace_flush(ptr %q, i32 3,
// CHECK-NEXT: call void asm sideeffect "clwb ($1)"
// CHECK: call void @__pmkit_trace_flush(ptr %p, i32 2,
// CHECK-NEXT: call void @__pmkit_trace_flush(ptr %q, i32 3,
// CHECK-NEXT: call void asm sideeffect "clflushopt $0; clwb $1"
// CHECK: %[[L1:.*]] = getelementptr i8, ptr %p, i64 64
// CHECK-NEXT: call void @__pmkit_trace_flush(ptr %[[L1]], i32 1,
// CHECK-NEXT: call void @__pmkit_trace_fence(i32 1,
// CHECK-NEXT: call void asm sideeffect "clflush 64($0); sfence"
// CHECK: call void @__pmkit_trace_fence(i32 1,
// CHECK-NEXT: call void @__pmkit_trace_flush(ptr %p, i32 3,
// CHECK-NEXT: call void asm sideeffect "sfence; clwb ($0)"
// CHECK: call void @__pmkit_trace_fence(i32 2,
// CHECK-NEXT: call void asm sideeffect "mfence"
// CHECK: call void @__pmkit_trace_fence(i32 1,
// CHECK-NEXT: call void asm sideeffect ".byte 0x0f, 0xae, 0xf8"
// CHECK-NOT: __pmkit_trace
// CHECK: ret void
void mnemonics(char *p, char *q) {
  __asm__ volatile("clwb (%1)" ::"r"(p), "r"(q) : "memory");
  __asm__ volatile("clflushopt %0; clwb %1"
                   : "+m"(*(volatile char *)p), "+m"(*(volatile char *)q));
  __asm__ volatile("clflush 64(%0); sfence" ::"r"(p) : "memory");
  __asm__ volatile("sfence; clwb (%0)" ::"r"(p) : "memory");
  __asm__ volatile("mfence" ::: "memory");
  __asm__ volatile(".byte 0x0f, 0xae, 0xf8" ::: "memory"); // sfence
}

// Nothing: lfence orders loads, not persistence; a comment that names
// instructions is no instruction; a flush of an address the asm computes
// itself, or of the stack slot an "rm" operand is spilled to, is no flush
// of an argument (a missing flush only adds crash images; a wrong one
// could hide some).
// CHECK-LABEL: define{{.*}} void @nothing(
// CHECK-NOT: __pmkit_trace
// CHECK: ret void
void nothing(char *p) {
  __asm__ volatile("lfence" ::: "memory");
  __asm__ volatile(".byte 0x0f, 0xae, 0xe8" ::: "memory"); // lfence
  __asm__ volatile("# sfence, clwb and lock are only words here" ::: "memory");
  __asm__ volatile("movq %0, %%rdi; clwb (%%rdi)" ::"r"(p) : "rdi", "memory");
  __asm__ volatile("clflush %0" ::"rm"(p) : "memory");
}

// An xchg with a memory operand is locked: its write is recorded as an
// atomic RMW of what the memory holds afterwards, bracketed like an IR
// atomic (no other thread's event between the write and its record), and
// that event is its fence. A locked add to the stack is a fence only (the
// stack is no PM; a lock prefix decoded as an instruction of its own counts
// once). The register form (cpuid.h's) is nothing. A plain add to memory
// is a write of its 8 bytes, recorded after it.
// CHECK-LABEL: define{{.*}} void @xchgs(
// CHECK: call i32 @__pmkit_trace_atomic_begin(ptr %w)
// CHECK-NEXT: asm sideeffect "xchgq $0, $1"
// CHECK-NEXT: [[V:%.*]] = load i64, ptr %w, align 1
// CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 {{%.*}}, ptr %w, i64 [[V]], i32 8, i32 3,
// CHECK: asm sideeffect "lock; addl $$0, (%rsp)"
// CHECK-NEXT: call void @__pmkit_trace_fence(i32 3,
// CHECK-NOT: __pmkit_trace
// CHECK: asm sideeffect "addq $$1, $0"
// CHECK-NEXT: call void @__pmkit_trace_write(ptr %w, ptr %w, i64 8,
// CHECK-NOT: __pmkit_trace
// CHECK: ret void
void xchgs(uint64_t *w) {
  uint64_t v = 1, a = 0, b;
  __asm__ volatile("xchgq %0, %1" : "+r"(v), "+m"(*w));
  __asm__ volatile("lock; addl $0, (%%rsp)" ::: "memory", "cc");
  __asm__ volatile("xchgq %%rbx, %q1" : "+a"(a), "=&r"(b));
  __asm__ volatile("addq $1, %0" : "+m"(*w));
}
