; SPDX-License-Identifier: Apache-2.0
; pmkit-robust, opt setting: where the persistency-state analysis puts its
; fences. Every PM store gets a clwb after it, but an sfence only before a
; store to a second location while the first is pending and before a return
; from a function code outside the module may call; none between two stores
; to one location. Stores to a block fresh from pmkit_alloc wait,
; and the whole block is written back (its first and last byte's lines)
; and fenced just before its address is stored to PM. An internal callee
; returns with its write pending; the caller fences before its own store.
; Hand-written IR, not C: the analysis keys locations by SSA base and
; offset, and the optimizer's choices (merging the stores, inlining @set)
; would remove the very cases pinned here.
;
; RUN: %opt -passes=pmkit-robust -pmkit-robust-setting=opt -S %s | %FileCheck %s
; The base setting fences after every store instead:
; RUN: %opt -passes=pmkit-robust -S %s | %FileCheck %s --check-prefix=BASE

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

declare i32 @pmkit_alloc(ptr, i64, ptr)

; CHECK-LABEL: define void @two_fields(
; CHECK-NEXT: store i64 1, ptr %pm, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %pm)
; CHECK-NEXT: %b = getelementptr inbounds i8, ptr %pm, i64 8
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: store i64 2, ptr %b, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %b)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
; BASE-LABEL: define void @two_fields(
; BASE-NEXT: store i64 1, ptr %pm, align 8
; BASE-NEXT: call void @llvm.x86.clwb(ptr %pm)
; BASE-NEXT: call void @llvm.x86.sse.sfence()
define void @two_fields(ptr %pm) {
  store i64 1, ptr %pm, align 8
  %b = getelementptr inbounds i8, ptr %pm, i64 8
  store i64 2, ptr %b, align 8
  ret void
}

; CHECK-LABEL: define void @same_field(
; CHECK-NEXT: store i64 1, ptr %pm, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %pm)
; CHECK-NEXT: store i64 2, ptr %pm, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %pm)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
define void @same_field(ptr %pm) {
  store i64 1, ptr %pm, align 8
  store i64 2, ptr %pm, align 8
  ret void
}

; CHECK-LABEL: define void @publish(
; CHECK-NEXT: %slot = alloca ptr, align 8
; CHECK-NEXT: %r = call i32 @pmkit_alloc(ptr %pool, i64 16, ptr %slot)
; CHECK-NEXT: %n = load ptr, ptr %slot, align 8
; CHECK-NEXT: store i64 7, ptr %n, align 8
; CHECK-NEXT: %nx = getelementptr inbounds i8, ptr %n, i64 8
; CHECK-NEXT: store i64 8, ptr %nx, align 8
; CHECK-NEXT: [[OBJ:%[0-9]+]] = load ptr, ptr %slot, align 8
; CHECK-NEXT: [[FIRST:%[0-9]+]] = getelementptr i8, ptr [[OBJ]], i64 0
; CHECK-NEXT: call void @llvm.x86.clwb(ptr [[FIRST]])
; CHECK-NEXT: [[LAST:%[0-9]+]] = getelementptr i8, ptr [[OBJ]], i64 15
; CHECK-NEXT: call void @llvm.x86.clwb(ptr [[LAST]])
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: store ptr %n, ptr %head, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %head)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
; BASE-LABEL: define void @publish(
; BASE: store i64 7, ptr %n, align 8
; BASE-NEXT: call void @llvm.x86.clwb(ptr %n)
; BASE-NEXT: call void @llvm.x86.sse.sfence()
define void @publish(ptr %pool, ptr %head) {
  %slot = alloca ptr, align 8
  %r = call i32 @pmkit_alloc(ptr %pool, i64 16, ptr %slot)
  %n = load ptr, ptr %slot, align 8
  store i64 7, ptr %n, align 8
  %nx = getelementptr inbounds i8, ptr %n, i64 8
  store i64 8, ptr %nx, align 8
  store ptr %n, ptr %head, align 8
  ret void
}

; CHECK-LABEL: define internal void @set(
; CHECK-NEXT: store i64 9, ptr %p, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %p)
; CHECK-NEXT: ret void
define internal void @set(ptr %p) {
  store i64 9, ptr %p, align 8
  ret void
}

; CHECK-LABEL: define void @caller(
; CHECK-NEXT: call void @set(ptr %pm)
; CHECK-NEXT: %b = getelementptr inbounds i8, ptr %pm, i64 8
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: store i64 10, ptr %b, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %b)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
define void @caller(ptr %pm) {
  call void @set(ptr %pm)
  %b = getelementptr inbounds i8, ptr %pm, i64 8
  store i64 10, ptr %b, align 8
  ret void
}
