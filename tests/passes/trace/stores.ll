; SPDX-License-Identifier: Apache-2.0
; pmkit-trace on writes: each store that may be to a pool is preceded by the
; inline test of its address against [__pmkit_pool_lo, __pmkit_pool_hi),
; and only inside the pool is __pmkit_trace_store called (address, value,
; size, location id). A store wider than 8 bytes is spilled to a stack
; slot and recorded as a write of its bytes; a non-temporal store calls
; __pmkit_trace_ntstore; memcpy and memset are recorded before they run.
; Stores to the stack or to a global are never tested. A load is recorded
; (after it, with its value) only with -pmkit-trace-loads. Without debug
; information every location of a function is "<function>:?", its id the
; 32-bit FNV-1a hash of the text; a constructor registers the table.
; Hand-written IR, not C: the width, alignment and metadata of each store
; (!nontemporal) are what the pass reads, and clang would choose them for C
; (merging stores, or a vector store the pass then handles differently).
;
; RUN: %opt -passes=pmkit-trace -S %s \
; RUN:   | %FileCheck %s --implicit-check-not='call void @__pmkit_trace_load'
; RUN: %opt -passes=pmkit-trace -pmkit-trace-loads -S %s \
; RUN:   | %FileCheck %s --check-prefix=LOADS

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

@counter = global i64 0

declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)

; CHECK: @pmkit.trace.loc.str = private unnamed_addr constant [9 x i8] c"stores:?\00"
; CHECK-NEXT: @pmkit.trace.locs = private constant [1 x { i32, ptr }] [{ i32, ptr } { i32 -804366712, ptr @pmkit.trace.loc.str }]
; CHECK-NEXT: @llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 0, ptr @pmkit.trace.ctor, ptr null }]

; CHECK-LABEL: define i64 @stores(
; CHECK-NEXT: %pmkit.wide = alloca <4 x i64>, align 32
; CHECK-NEXT: %local = alloca i64, align 8
; CHECK-NEXT: [[A:%[0-9]+]] = ptrtoint ptr %p to i64
; CHECK-NEXT: %pmkit.lo = load i64, ptr @__pmkit_pool_lo, align 8
; CHECK-NEXT: %pmkit.hi = load i64, ptr @__pmkit_pool_hi, align 8
; CHECK-NEXT: [[GE:%[0-9]+]] = icmp uge i64 [[A]], %pmkit.lo
; CHECK-NEXT: [[LT:%[0-9]+]] = icmp ult i64 [[A]], %pmkit.hi
; CHECK-NEXT: [[IN:%[0-9]+]] = and i1 [[GE]], [[LT]]
; CHECK-NEXT: br i1 [[IN]], label %[[REC:[0-9]+]], label %[[GO:[0-9]+]]
; CHECK: {{^}}[[REC]]:
; CHECK-NEXT: call void @__pmkit_trace_store(ptr %p, i64 %v, i32 8, i32 -804366712)
; CHECK-NEXT: br label %[[GO]]
; CHECK: {{^}}[[GO]]:
; CHECK-NEXT: store i64 %v, ptr %p, align 8
; CHECK: call void @__pmkit_trace_store(ptr %q, i64 3, i32 2, i32 -804366712)
; CHECK: store i16 3, ptr %q, align 2
; CHECK: store <4 x i64> zeroinitializer, ptr %pmkit.wide, align 32
; CHECK-NEXT: call void @__pmkit_trace_write(ptr %w, ptr %pmkit.wide, i64 32, i32 -804366712)
; CHECK: store <4 x i64> zeroinitializer, ptr %w, align 8
; The stack and a global: no test, no record.
; CHECK-NEXT: store i64 %v, ptr %local, align 8
; CHECK-NEXT: store i64 %v, ptr @counter, align 8
; CHECK-NEXT: {{%[0-9]+}} = ptrtoint ptr %p to i64
; CHECK: call void @__pmkit_trace_write(ptr %p, ptr %src, i64 %n, i32 -804366712)
; CHECK: call void @llvm.memcpy.p0.p0.i64(ptr %p, ptr %src, i64 %n, i1 false)
; CHECK: call void @__pmkit_trace_memset(ptr %p, i32 7, i64 %n, i32 -804366712)
; CHECK: call void @llvm.memset.p0.i64(ptr %p, i8 7, i64 %n, i1 false)
; CHECK: call void @__pmkit_trace_ntstore(ptr %p, i64 %v, i32 8, i32 -804366712)
; CHECK: store i64 %v, ptr %p, align 8, !nontemporal
; CHECK-NEXT: %x = load i64, ptr %p, align 8
; CHECK-NEXT: ret i64 %x
; LOADS-LABEL: define i64 @stores(
; LOADS: %x = load i64, ptr %p, align 8
; LOADS-NEXT: {{%[0-9]+}} = ptrtoint ptr %p to i64
; LOADS: call void @__pmkit_trace_load(ptr %p, i64 %x, i32 8, i32 -804366712)
define i64 @stores(ptr %p, ptr %src, i64 %v, i64 %n) {
  %local = alloca i64, align 8
  store i64 %v, ptr %p, align 8
  %q = getelementptr inbounds i8, ptr %p, i64 8
  store i16 3, ptr %q, align 2
  %w = getelementptr inbounds i8, ptr %p, i64 16
  store <4 x i64> zeroinitializer, ptr %w, align 8
  store i64 %v, ptr %local, align 8
  store i64 %v, ptr @counter, align 8
  call void @llvm.memcpy.p0.p0.i64(ptr %p, ptr %src, i64 %n, i1 false)
  call void @llvm.memset.p0.i64(ptr %p, i8 7, i64 %n, i1 false)
  store i64 %v, ptr %p, align 8, !nontemporal !0
  %x = load i64, ptr %p, align 8
  ret i64 %x
}

; CHECK-LABEL: define internal void @pmkit.trace.ctor() {
; CHECK-NEXT: call void @__pmkit_trace_locs(ptr @pmkit.trace.locs, i32 1)
; CHECK-NEXT: ret void

!0 = !{i32 1}
