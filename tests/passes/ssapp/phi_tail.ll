; SPDX-License-Identifier: Apache-2.0
; pmkit-ssapp across blocks: a phi becomes a frame slot (offset 24), stored
; at the end of each predecessor and loaded where the phi was, so that no
; phi is left. A read RISE whose successor has a phi gets a tail block
; (read.split) holding its branch and the phi's store: where recovery
; continues after it (resume point 2R+1 = 5). The entry block, with no
; load, is a write RISE (RISE 1) that stores the phi's constant input;
; an i1 argument lives in the frame (offset 40) like the pointer (32).
; Hand-written IR, not C: the phi, the block structure and which value
; crosses which block are what this pins, and clang and its pipeline
; choose all three for C (a select instead of the branch, for one).
;
; RUN: %opt -passes=pmkit-ssapp -pmkit-ssapp-report -S %s 2>%t.err \
; RUN:   | %FileCheck %s --implicit-check-not='= phi'
; RUN: %FileCheck %s --check-prefix=REPORT < %t.err

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; CHECK: @__pmkit_ssapp_rises = private constant [4 x { i32, i32, i32, i32 }] [{ i32, i32, i32, i32 } { i32 2, i32 0, i32 0, i32 0 }, { i32, i32, i32, i32 } { i32 1, i32 0, i32 2, i32 0 }, { i32, i32, i32, i32 } { i32 2, i32 2, i32 0, i32 0 }, { i32, i32, i32, i32 } { i32 3, i32 2, i32 0, i32 0 }]
; CHECK-NEXT: @__pmkit_ssapp_slots = private constant [2 x i32] [i32 48, i32 56]

; CHECK-LABEL: define void @pick(
; CHECK-NEXT: ssapp.entry:
; CHECK-NEXT: [[FRAME:%[0-9]+]] = call ptr @__pmkit_ssapp_enter(i64 -4680431824301474856, ptr %r)
; CHECK-NEXT: call void @__pmkit_ssapp_check_ptr(ptr %r, i32 1)
; CHECK-NEXT: [[RS:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 32
; CHECK-NEXT: store ptr %r, ptr [[RS]], align 8
; CHECK-NEXT: [[CS:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 40
; CHECK-NEXT: store i1 %c, ptr [[CS]], align 8
; CHECK-NEXT: call void @__pmkit_ssapp_begin()
; CHECK-NEXT: br label %entry
; CHECK: {{^}}entry:
; CHECK-NEXT: store volatile i64 1, ptr [[FRAME]], align 8
; CHECK-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: [[CS1:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 40
; CHECK-NEXT: [[C:%[0-9]+]] = load i1, ptr [[CS1]], align 8
; CHECK-NEXT: [[PS0:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 24
; CHECK-NEXT: store i64 0, ptr [[PS0]], align 8
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: br i1 [[C]], label %read, label %join
; CHECK: {{^}}read:
; CHECK: [[B2:%[0-9]+]] = or i64 2, {{%[0-9]+}}
; CHECK-NEXT: store volatile i64 [[B2]], ptr [[FRAME]], align 8
; CHECK: %x = load i64, ptr {{%[0-9]+}}, align 8
; CHECK: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: br label %read.split
; The tail: the phi's store, no buoy of its own, no fence.
; CHECK: {{^}}read.split:
; CHECK-NOT: store volatile
; CHECK: [[PS1:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 24
; CHECK-NEXT: store i64 {{%[0-9]+}}, ptr [[PS1]], align 8
; CHECK-NEXT: br label %join
; CHECK: {{^}}join:
; CHECK-NEXT: store volatile i64 3, ptr [[FRAME]], align 8
; CHECK-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: [[RS2:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 32
; CHECK-NEXT: [[R2:%[0-9]+]] = load ptr, ptr [[RS2]], align 8
; CHECK-NEXT: [[PS2:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 24
; CHECK-NEXT: [[V:%[0-9]+]] = load i64, ptr [[PS2]], align 8
; CHECK-NEXT: %d = getelementptr inbounds i8, ptr [[R2]], i64 8
; CHECK-NEXT: store i64 [[V]], ptr %d, align 8
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: br label %join.split
; CHECK: {{^}}join.split:
; CHECK-NEXT: store volatile i64 4, ptr [[FRAME]], align 8
; CHECK-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: call void @__pmkit_ssapp_exit()
define void @pick(ptr %r, i1 %c) "pmkit.fase" {
entry:
  br i1 %c, label %read, label %join
read:
  %x = load i64, ptr %r, align 8
  br label %join
join:
  %v = phi i64 [ %x, %read ], [ 0, %entry ]
  %d = getelementptr inbounds i8, ptr %r, i64 8
  store i64 %v, ptr %d, align 8
  ret void
}

; CHECK-LABEL: define internal void @pick.ssapp.recover(ptr %0, i64 %1) {
; CHECK: switch i64 %1, label %ssapp.bad [
; CHECK-NEXT: i64 2, label %entry
; CHECK-NEXT: i64 4, label %read
; CHECK-NEXT: i64 5, label %read.split
; CHECK-NEXT: i64 6, label %join
; CHECK-NEXT: i64 8, label %join.split
; CHECK-NEXT: ]

; REPORT:      pmkit-ssapp: FASE pick: 4 RISEs, frame 64 bytes{{$}}
; REPORT-NEXT:   RISE 1 write{{$}}
; REPORT-NEXT:   RISE 2 read, 2 torn-bit slots, tail{{$}}
; REPORT-NEXT:   RISE 3 write{{$}}
; REPORT-NEXT:   RISE 4 call{{$}}
