; SPDX-License-Identifier: Apache-2.0
; pmkit-clobber: what recovery needs from the module. A FASE's arguments are
; recorded as 64-bit words (a pointer as such, an i32 zero-extended, a
; double by its bits); a replay stub decodes the words and calls the FASE
; again; the FASE table maps its id to its name, stub, argument count and
; the setting's flags, and a constructor registers it. A function that is
; not a FASE has no entry and no stub. The settings: undo logs every PM
; write, the run of logs in one block sharing one fence (a batch call for
; all but the last) and sets flag 1; eadr writes nothing back and sets
; flag 2.
; Hand-written IR, not C: the argument types and the table's layout are
; what the runtime decodes, and clang's calling convention for them (how
; it passes a double, or a small struct) is not what this test is about.
;
; RUN: %opt -passes=pmkit-clobber -S %s | %FileCheck %s --check-prefixes=CHECK,ADR
; RUN: %opt -passes=pmkit-clobber -pmkit-clobber-setting=undo -S %s \
; RUN:   | %FileCheck %s --check-prefix=UNDO
; RUN: %opt -passes=pmkit-clobber -pmkit-clobber-domain=eadr -S %s \
; RUN:   | %FileCheck %s --check-prefixes=CHECK,EADR

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; CHECK: @__pmkit_clobber_name = private constant [4 x i8] c"put\00"
; ADR: @__pmkit_clobber_table = internal constant [1 x { i64, ptr, ptr, i32, i32 }] [{ i64, ptr, ptr, i32, i32 } { i64 8643375363983527406, ptr @__pmkit_clobber_name, ptr @__pmkit_clobber_replay.put, i32 3, i32 0 }]
; UNDO: @__pmkit_clobber_table = internal constant [1 x { i64, ptr, ptr, i32, i32 }] [{ i64, ptr, ptr, i32, i32 } { i64 8643375363983527406, ptr @__pmkit_clobber_name, ptr @__pmkit_clobber_replay.put, i32 3, i32 1 }]
; EADR: @__pmkit_clobber_table = internal constant [1 x { i64, ptr, ptr, i32, i32 }] [{ i64, ptr, ptr, i32, i32 } { i64 8643375363983527406, ptr @__pmkit_clobber_name, ptr @__pmkit_clobber_replay.put, i32 3, i32 2 }]
; CHECK: @llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 65535, ptr @__pmkit_clobber_ctor, ptr null }]

; CHECK-LABEL: define void @put(
; CHECK-NEXT: [[OUTER:%[0-9]+]] = call i32 @__pmkit_clobber_enter(i64 8643375363983527406)
; CHECK-NEXT: [[IS:%[0-9]+]] = icmp ne i32 [[OUTER]], 0
; CHECK-NEXT: br i1 [[IS]], label %[[ARGS:[0-9]+]], label %[[BODY:[0-9]+]]
; CHECK: {{^}}[[ARGS]]:
; CHECK-NEXT: call void @__pmkit_clobber_arg_ptr(ptr %rec)
; CHECK-NEXT: [[K:%[0-9]+]] = zext i32 %k to i64
; CHECK-NEXT: call void @__pmkit_clobber_arg(i64 [[K]])
; CHECK-NEXT: [[W:%[0-9]+]] = bitcast double %w to i64
; CHECK-NEXT: call void @__pmkit_clobber_arg(i64 [[W]])
; CHECK-NEXT: call void @__pmkit_clobber_begin()
; CHECK-NEXT: br label %[[BODY]]
; CHECK: {{^}}[[BODY]]:
; CHECK-NEXT: %kk = sext i32 %k to i64
; No input is read: nothing is logged.
; ADR-NEXT: store i64 %kk, ptr %rec, align 8
; ADR: call void @__pmkit_clobber_wb(ptr %rec, i64 8)
; ADR: store double %w, ptr %wp, align 8
; ADR: call void @__pmkit_clobber_wb(ptr %wp, i64 8)
; EADR-NEXT: store i64 %kk, ptr %rec, align 8
; EADR-NEXT: %wp = getelementptr inbounds i8, ptr %rec, i64 8
; EADR-NEXT: store double %w, ptr %wp, align 8
; CHECK-NOT: __pmkit_clobber_log
; CHECK: call void @__pmkit_clobber_exit()
; CHECK-NEXT: ret void
; UNDO-LABEL: define void @put(
; UNDO: %kk = sext i32 %k to i64
; UNDO-NEXT: %wp = getelementptr inbounds i8, ptr %rec, i64 8
; UNDO-NEXT: call void @__pmkit_clobber_log_batch(ptr %rec, i64 8)
; UNDO-NEXT: call void @__pmkit_clobber_log(ptr %wp, i64 8)
; UNDO-NEXT: store i64 %kk, ptr %rec, align 8
; UNDO: call void @__pmkit_clobber_wb(ptr %rec, i64 8)
; UNDO-NOT: __pmkit_clobber_log
; UNDO: store double %w, ptr %wp, align 8
; UNDO: call void @__pmkit_clobber_wb(ptr %wp, i64 8)
define void @put(ptr %rec, i32 %k, double %w) "pmkit.fase" {
  %kk = sext i32 %k to i64
  store i64 %kk, ptr %rec, align 8
  %wp = getelementptr inbounds i8, ptr %rec, i64 8
  store double %w, ptr %wp, align 8
  ret void
}

; CHECK-LABEL: define void @helper(
; CHECK-NEXT: store i64 0, ptr %rec, align 8
; CHECK-NEXT: ret void
; UNDO-LABEL: define void @helper(
; UNDO-NEXT: store i64 0, ptr %rec, align 8
; UNDO-NEXT: ret void
define void @helper(ptr %rec) {
  store i64 0, ptr %rec, align 8
  ret void
}

; CHECK-LABEL: define internal void @__pmkit_clobber_replay.put(ptr %0) {
; CHECK-NEXT: [[P0:%[0-9]+]] = getelementptr i64, ptr %0, i64 0
; CHECK-NEXT: [[W0:%[0-9]+]] = load i64, ptr [[P0]], align 8
; CHECK-NEXT: [[REC:%[0-9]+]] = inttoptr i64 [[W0]] to ptr
; CHECK-NEXT: [[P1:%[0-9]+]] = getelementptr i64, ptr %0, i64 1
; CHECK-NEXT: [[W1:%[0-9]+]] = load i64, ptr [[P1]], align 8
; CHECK-NEXT: [[K2:%[0-9]+]] = trunc i64 [[W1]] to i32
; CHECK-NEXT: [[P2:%[0-9]+]] = getelementptr i64, ptr %0, i64 2
; CHECK-NEXT: [[W2:%[0-9]+]] = load i64, ptr [[P2]], align 8
; CHECK-NEXT: [[D:%[0-9]+]] = bitcast i64 [[W2]] to double
; CHECK-NEXT: call void @put(ptr [[REC]], i32 [[K2]], double [[D]])
; CHECK-NEXT: ret void
; CHECK-NOT: @__pmkit_clobber_replay.helper
; CHECK-LABEL: define internal void @__pmkit_clobber_ctor() {
; CHECK-NEXT: call void @__pmkit_clobber_register(ptr @__pmkit_clobber_table, i32 1)
; CHECK-NEXT: ret void
