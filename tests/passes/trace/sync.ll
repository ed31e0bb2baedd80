; SPDX-License-Identifier: Apache-2.0
; pmkit-trace on what orders persists: a flush is recorded just before it
; with its kind (1 clflush, 2 clflushopt, 3 clwb), as an intrinsic or as
; inline asm; a fence just before it (1 sfence, 2 mfence or a seq_cst
; fence), a locked instruction in asm just after it (3). A single-thread
; or non-seq_cst fence emits no instruction on x86 and is not recorded.
; An atomic RMW, a compare-exchange and an atomic store on memory that may
; be a pool's are bracketed by __pmkit_trace_atomic_begin/end, the end
; given the value written and the event (3 RMW, 1 store; a seq_cst store
; is an xchg, 3; a compare-exchange 3 if it succeeded, 6 -- a fence -- if
; not). A locked RMW on the stack is recorded as a fence only (token -1);
; an `atomicrmw or 0` whose result is unused emits nothing and is not
; recorded.
; Hand-written IR, not C: the exact intrinsics, asm strings, orderings
; and sync scopes are what the pass decides on, and C's builtins and
; atomics map to them through clang's headers and code generation.
;
; RUN: %opt -passes=pmkit-trace -S %s | %FileCheck %s

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

declare void @llvm.x86.clwb(ptr)
declare void @llvm.x86.clflushopt(ptr)
declare void @llvm.x86.sse2.clflush(ptr)
declare void @llvm.x86.sse.sfence()
declare void @llvm.x86.sse2.mfence()

; (Location ids: FNV-1a of "flushes:?" and "atomics:?".)
; CHECK-LABEL: define void @flushes(
; CHECK-NEXT: call void @__pmkit_trace_flush(ptr %p, i32 3, i32 -289488902)
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %p)
; CHECK-NEXT: call void @__pmkit_trace_flush(ptr %p, i32 2, i32 -289488902)
; CHECK-NEXT: call void @llvm.x86.clflushopt(ptr %p)
; CHECK-NEXT: call void @__pmkit_trace_flush(ptr %p, i32 1, i32 -289488902)
; CHECK-NEXT: call void @llvm.x86.sse2.clflush(ptr %p)
; CHECK-NEXT: call void @__pmkit_trace_fence(i32 1, i32 -289488902)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: call void @__pmkit_trace_fence(i32 2, i32 -289488902)
; CHECK-NEXT: call void @llvm.x86.sse2.mfence()
; CHECK-NEXT: call void @__pmkit_trace_fence(i32 2, i32 -289488902)
; CHECK-NEXT: fence seq_cst
; CHECK-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: fence release
; CHECK-NEXT: call void @__pmkit_trace_flush(ptr %p, i32 3, i32 -289488902)
; CHECK-NEXT: call void asm sideeffect "clwb $0", "*m,~{memory}"(ptr elementtype(i8) %p)
; CHECK-NEXT: call void asm sideeffect "lock; addl $$0, (%rsp)", "~{memory},~{cc}"()
; CHECK-NEXT: call void @__pmkit_trace_fence(i32 3, i32 -289488902)
; CHECK-NEXT: ret void
define void @flushes(ptr %p) {
  call void @llvm.x86.clwb(ptr %p)
  call void @llvm.x86.clflushopt(ptr %p)
  call void @llvm.x86.sse2.clflush(ptr %p)
  call void @llvm.x86.sse.sfence()
  call void @llvm.x86.sse2.mfence()
  fence seq_cst
  fence syncscope("singlethread") seq_cst
  fence release
  call void asm sideeffect "clwb $0", "*m,~{memory}"(ptr elementtype(i8) %p)
  call void asm sideeffect "lock; addl $$0, (%rsp)", "~{memory},~{cc}"()
  ret void
}

; CHECK-LABEL: define void @atomics(
; CHECK-NEXT: %local = alloca i64, align 8
; CHECK-NEXT: [[T1:%[0-9]+]] = call i32 @__pmkit_trace_atomic_begin(ptr %p)
; CHECK-NEXT: %o = atomicrmw add ptr %p, i64 2 seq_cst, align 8
; CHECK-NEXT: %new = add i64 %o, 2
; CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 [[T1]], ptr %p, i64 %new, i32 8, i32 3, i32 -1582078)
; CHECK-NEXT: [[T2:%[0-9]+]] = call i32 @__pmkit_trace_atomic_begin(ptr %p)
; CHECK-NEXT: %x = cmpxchg ptr %p, i64 0, i64 5 seq_cst seq_cst, align 8
; CHECK-NEXT: [[OK:%[0-9]+]] = extractvalue { i64, i1 } %x, 1
; CHECK-NEXT: [[EV:%[0-9]+]] = select i1 [[OK]], i32 3, i32 6
; CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 [[T2]], ptr %p, i64 5, i32 8, i32 [[EV]], i32 -1582078)
; CHECK-NEXT: [[T3:%[0-9]+]] = call i32 @__pmkit_trace_atomic_begin(ptr %p)
; CHECK-NEXT: store atomic i64 9, ptr %p release, align 8
; CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 [[T3]], ptr %p, i64 9, i32 8, i32 1, i32 -1582078)
; CHECK-NEXT: [[T4:%[0-9]+]] = call i32 @__pmkit_trace_atomic_begin(ptr %p)
; CHECK-NEXT: store atomic i64 10, ptr %p seq_cst, align 8
; CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 [[T4]], ptr %p, i64 10, i32 8, i32 3, i32 -1582078)
; CHECK-NEXT: %l = atomicrmw add ptr %local, i64 1 seq_cst, align 8
; CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 -1, ptr %local, i64 0, i32 0, i32 3, i32 -1582078)
; CHECK-NEXT: %z = atomicrmw or ptr %p, i64 0 monotonic, align 8
; CHECK-NEXT: ret void
define void @atomics(ptr %p) {
  %local = alloca i64, align 8
  %o = atomicrmw add ptr %p, i64 2 seq_cst, align 8
  %x = cmpxchg ptr %p, i64 0, i64 5 seq_cst seq_cst, align 8
  store atomic i64 9, ptr %p release, align 8
  store atomic i64 10, ptr %p seq_cst, align 8
  %l = atomicrmw add ptr %local, i64 1 seq_cst, align 8
  %z = atomicrmw or ptr %p, i64 0 monotonic, align 8
  ret void
}
