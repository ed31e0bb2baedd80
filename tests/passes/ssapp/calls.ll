; SPDX-License-Identifier: Apache-2.0
; pmkit-ssapp and the operations recovery must be able to redo or detect:
; a PM lock becomes __pmkit_ssapp_lock/unlock (kind 1, a mutex) in a call
; RISE of its own; pmkit_zalloc becomes __pmkit_ssapp_alloc (zeroed: 1),
; its out argument moved into the frame, in an alloc RISE; a pointer
; compare-exchange becomes one __pmkit_ssapp_rmw (op 1, CAS: the desired
; and the expected value as integers) in an rmw RISE, its old value and
; success flag rebuilt from the call's result, and the atomic load of the
; word it tags is masked to its low 48 bits. The RISE kinds, in order:
; call, alloc, read, write, rmw, call (unlock), call (exit). Neither the
; original calls nor the cmpxchg are left.
; Hand-written IR, not C: the calls, the atomic operations and the
; pointer types are what the pass rewrites, and C's atomics and the
; optimizer could spell them differently (an integer CAS, a merged load).
;
; Nothing of the originals is left, in the FASE or its recovery version:
; RUN: %opt -passes=pmkit-ssapp -S %s | %FileCheck %s \
; RUN:   --implicit-check-not='call void @pmkit_mutex_lock' \
; RUN:   --implicit-check-not='call i32 @pmkit_zalloc' \
; RUN:   --implicit-check-not=cmpxchg \
; RUN:   --implicit-check-not='call void @pmkit_mutex_unlock'

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

declare i32 @pmkit_zalloc(ptr, i64, ptr)
declare void @pmkit_mutex_lock(ptr)
declare void @pmkit_mutex_unlock(ptr)

; Kinds: 1 read, 2 write, 3 call, 4 alloc, 5 rmw.
; CHECK: @__pmkit_ssapp_rises = private constant [7 x { i32, i32, i32, i32 }] [{ i32, i32, i32, i32 } { i32 3, i32 0, i32 0, i32 0 }, { i32, i32, i32, i32 } { i32 4, i32 0, i32 0, i32 0 }, { i32, i32, i32, i32 } { i32 1, i32 0, i32 6, i32 0 }, { i32, i32, i32, i32 } { i32 2, i32 6, i32 0, i32 0 }, { i32, i32, i32, i32 } { i32 5, i32 6, i32 2, i32 0 }, { i32, i32, i32, i32 } { i32 3, i32 8, i32 0, i32 0 }, { i32, i32, i32, i32 } { i32 3, i32 8, i32 0, i32 0 }]

; CHECK-LABEL: define void @push(
; CHECK: [[FRAME:%[0-9]+]] = call ptr @__pmkit_ssapp_enter(i64 7818252312440358301, ptr %pool)
; CHECK-NEXT: call void @__pmkit_ssapp_check_ptr(ptr %pool, i32 1)
; CHECK-NEXT: call void @__pmkit_ssapp_check_ptr(ptr %list, i32 2)
; The local %slot moves to the frame (offset 32).
; CHECK: call void @__pmkit_ssapp_begin()
; CHECK-NEXT: [[SLOT:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 32
; RISE 1:
; CHECK: store volatile i64 1, ptr [[FRAME]], align 8
; CHECK: call void @__pmkit_ssapp_lock(ptr {{%[0-9]+}}, i32 1)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; RISE 2:
; CHECK: store volatile i64 2, ptr [[FRAME]], align 8
; CHECK: call i32 @__pmkit_ssapp_alloc(ptr {{%[0-9]+}}, i64 16, ptr [[SLOT]], i32 1)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; RISE 3 reads: its buoy carries the torn bit.
; CHECK: [[B3:%[0-9]+]] = or i64 3, {{%[0-9]+}}
; CHECK-NEXT: store volatile i64 [[B3]], ptr [[FRAME]], align 8
; CHECK: %n = load ptr, ptr [[SLOT]], align 8
; CHECK: %old = load atomic ptr, ptr %top monotonic, align 8
; CHECK-NEXT: {{%[0-9]+}} = call ptr @llvm.ptrmask.p0.i64(ptr %old, i64 281474976710655)
; RISE 4 writes:
; CHECK: store volatile i64 4, ptr [[FRAME]], align 8
; RISE 5, the CAS alone:
; CHECK: [[B5:%[0-9]+]] = or i64 5, {{%[0-9]+}}
; CHECK-NEXT: store volatile i64 [[B5]], ptr [[FRAME]], align 8
; CHECK: [[RES:%[0-9]+]] = call i64 @__pmkit_ssapp_rmw(ptr {{%[0-9]+}}, i32 1, i64 {{%[0-9]+}}, i64 {{%[0-9]+}})
; CHECK: call void @llvm.x86.sse.sfence()
; RISE 6:
; CHECK: store volatile i64 6, ptr [[FRAME]], align 8
; CHECK: [[OLDP:%[0-9]+]] = inttoptr i64 {{%[0-9]+}} to ptr
; CHECK-NEXT: [[OK:%[0-9]+]] = icmp eq i64 {{%[0-9]+}}, {{%[0-9]+}}
; CHECK-NEXT: [[P0:%[0-9]+]] = insertvalue { ptr, i1 } poison, ptr [[OLDP]], 0
; CHECK-NEXT: {{%[0-9]+}} = insertvalue { ptr, i1 } [[P0]], i1 [[OK]], 1
; CHECK-NEXT: call void @__pmkit_ssapp_unlock(ptr {{%[0-9]+}}, i32 1)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; RISE 7:
; CHECK: store volatile i64 7, ptr [[FRAME]], align 8
; CHECK-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: call void @__pmkit_ssapp_exit()
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
; CHECK-NEXT: }
define void @push(ptr %pool, ptr %list) "pmkit.fase" {
  %slot = alloca ptr, align 8
  call void @pmkit_mutex_lock(ptr %list)
  %e = call i32 @pmkit_zalloc(ptr %pool, i64 16, ptr %slot)
  %n = load ptr, ptr %slot, align 8
  %top = getelementptr inbounds i8, ptr %list, i64 8
  %old = load atomic ptr, ptr %top monotonic, align 8
  store ptr %old, ptr %n, align 8
  %r = cmpxchg ptr %top, ptr %old, ptr %n seq_cst seq_cst, align 8
  call void @pmkit_mutex_unlock(ptr %list)
  ret void
}

; The recovery version and the constructor follow.
; CHECK: define internal void @push.ssapp.recover(ptr %0, i64 %1) {
; CHECK: define internal void @__pmkit_ssapp_ctor()
