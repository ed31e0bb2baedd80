; SPDX-License-Identifier: Apache-2.0
; pmkit-robust, base setting, on each kind of access it persists: a store to
; PM gets a clwb of its line and an sfence right after it (one clwb per 64
; bytes of a wide store, and one of its last byte when it may cross a line);
; a store aligned below its size is first split into aligned parts, each
; persisted; atomic and volatile loads, an atomic RMW and a compare-and-swap
; get the same pair; memset and memcpy a range write-back of their length.
; A plain load and stores to the stack or to a global get nothing, and a
; function the pass wrote back in needs the clwb target feature.
; Hand-written IR, not C: clang's output (alignments, store merging, how
; it spells atomics and copies) could change under these checks, and every
; access here is one the pass must see exactly as written.
;
; RUN: %opt -passes=pmkit-robust -S %s | %FileCheck %s
; The checks fail on the input itself, so they test the pass:
; RUN: %opt -S %s | %not %FileCheck %s

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

@dram = global i64 0

; (%pm, a parameter of an exported function, may point to PM.)
; CHECK-LABEL: define void @stores(
; CHECK-SAME: ptr %pm, i64 %v) #[[CLWB:[0-9]+]] {
; CHECK-NEXT: %local = alloca i64, align 8
; CHECK-NEXT: store i64 %v, ptr %pm, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %pm)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; An i32 aligned to 2 becomes two i16 stores, low half first:
; CHECK-NEXT: %f = getelementptr inbounds i8, ptr %pm, i64 8
; CHECK-NEXT: [[LO:%[0-9]+]] = getelementptr inbounds i8, ptr %f, i64 0
; CHECK-NEXT: store i16 7, ptr [[LO]], align 2
; CHECK-NEXT: call void @llvm.x86.clwb(ptr [[LO]])
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: [[HI:%[0-9]+]] = getelementptr inbounds i8, ptr %f, i64 2
; CHECK-NEXT: store i16 1, ptr [[HI]], align 2
; CHECK-NEXT: call void @llvm.x86.clwb(ptr [[HI]])
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; The stack and a global are DRAM:
; CHECK-NEXT: store i64 %v, ptr %local, align 8
; CHECK-NEXT: store i64 %v, ptr @dram, align 8
; 128 bytes aligned to 8: lines at +0, +64 and the last byte's, one fence.
; CHECK-NEXT: %big = getelementptr inbounds i8, ptr %pm, i64 64
; CHECK-NEXT: store <16 x i64> zeroinitializer, ptr %big, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %big)
; CHECK-NEXT: [[L2:%[0-9]+]] = getelementptr i8, ptr %big, i64 64
; CHECK-NEXT: call void @llvm.x86.clwb(ptr [[L2]])
; CHECK-NEXT: [[END:%[0-9]+]] = getelementptr i8, ptr %big, i64 127
; CHECK-NEXT: call void @llvm.x86.clwb(ptr [[END]])
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
define void @stores(ptr %pm, i64 %v) {
  %local = alloca i64, align 8
  store i64 %v, ptr %pm, align 8
  %f = getelementptr inbounds i8, ptr %pm, i64 8
  store i32 65543, ptr %f, align 2
  store i64 %v, ptr %local, align 8
  store i64 %v, ptr @dram, align 8
  %big = getelementptr inbounds i8, ptr %pm, i64 64
  store <16 x i64> zeroinitializer, ptr %big, align 8
  ret void
}

; CHECK-LABEL: define i64 @atomics(
; CHECK-SAME: ptr %pm) #[[CLWB]] {
; CHECK-NEXT: %plain = load i64, ptr %pm, align 8
; CHECK-NEXT: %acq = load atomic i64, ptr %pm acquire, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %pm)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: %vol = load volatile i64, ptr %pm, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %pm)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: %old = atomicrmw add ptr %pm, i64 1 seq_cst, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %pm)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: %pair = cmpxchg ptr %pm, i64 %old, i64 %acq seq_cst seq_cst, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %pm)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret i64 %plain
define i64 @atomics(ptr %pm) {
  %plain = load i64, ptr %pm, align 8
  %acq = load atomic i64, ptr %pm acquire, align 8
  %vol = load volatile i64, ptr %pm, align 8
  %old = atomicrmw add ptr %pm, i64 1 seq_cst, align 8
  %pair = cmpxchg ptr %pm, i64 %old, i64 %acq seq_cst seq_cst, align 8
  ret i64 %plain
}

; CHECK-LABEL: define void @copies(
; CHECK-SAME: ptr %pm, ptr %src, i64 %n) #[[CLWB]] {
; CHECK-NEXT: %tmp = alloca [100 x i8], align 1
; CHECK-NEXT: call void @llvm.memset.p0.i64(ptr %pm, i8 0, i64 100, i1 false)
; CHECK-NEXT: call void @__pmkit_flush_range(ptr %pm, i64 100)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: call void @llvm.memcpy.p0.p0.i64(ptr %pm, ptr %src, i64 %n, i1 false)
; CHECK-NEXT: call void @__pmkit_flush_range(ptr %pm, i64 %n)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: call void @llvm.memcpy.p0.p0.i64(ptr %tmp, ptr %pm, i64 100, i1 false)
; CHECK-NEXT: ret void
define void @copies(ptr %pm, ptr %src, i64 %n) {
  %tmp = alloca [100 x i8], align 1
  call void @llvm.memset.p0.i64(ptr %pm, i8 0, i64 100, i1 false)
  call void @llvm.memcpy.p0.p0.i64(ptr %pm, ptr %src, i64 %n, i1 false)
  call void @llvm.memcpy.p0.p0.i64(ptr %tmp, ptr %pm, i64 100, i1 false)
  ret void
}

; Nothing written back: no clwb feature.
; CHECK-LABEL: define i64 @reads(ptr %pm) {
; CHECK-NEXT: %v = load i64, ptr %pm, align 8
; CHECK-NEXT: ret i64 %v
define i64 @reads(ptr %pm) {
  %v = load i64, ptr %pm, align 8
  ret i64 %v
}

declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

; CHECK: attributes #[[CLWB]] = { "target-features"="+clwb" }
