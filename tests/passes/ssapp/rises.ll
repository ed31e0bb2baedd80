; SPDX-License-Identifier: Apache-2.0
; pmkit-ssapp on the smallest FASE that reads, computes and writes: the
; whole of what it becomes. A set-up block takes the thread's persistent
; frame, checks the pointer argument and stores it in the frame (offset
; 24), then begins. RISE 1 (read) flips its torn bit (its flipper at 16),
; sets the buoy (frame offset 0) to 1 with the bit, loads through the
; argument reloaded from the frame, and keeps the value it computed in two
; torn-bit slots of 32 bits (32, 40); RISE 2 (write) sets the buoy to 2 and
; stores the value rebuilt from the slots; RISE 3 (call) is the exit. Each
; RISE ends with an sfence, or a compiler barrier under
; -pmkit-ssapp-fence=compiler. The recovery version switches on the resume
; point (2R: at RISE R; 2R+1: after read RISE R). The table gives recovery
; the id, the recovery version, the frame size (48 bytes, rounded to 64),
; the RISEs (kind, first slot, slot count, line), the torn-bit slots and
; the pointer slots; a constructor registers it. A function that is not a
; FASE is left alone.
; Hand-written IR, not C: where the pass cuts RISEs and what lives across
; them depends on every load, store and computation of the FASE, which
; clang's output and pipeline decide for C.
;
; RUN: %opt -passes=pmkit-ssapp -pmkit-ssapp-report -S %s 2>%t.err \
; RUN:   | %FileCheck %s --check-prefixes=CHECK,SFENCE
; RUN: %FileCheck %s --check-prefix=REPORT < %t.err
; RUN: %opt -passes=pmkit-ssapp -pmkit-ssapp-fence=compiler -S %s \
; RUN:   | %FileCheck %s --check-prefixes=CHECK,COMPILER

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; CHECK: @__pmkit_ssapp_rises = private constant [3 x { i32, i32, i32, i32 }] [{ i32, i32, i32, i32 } { i32 1, i32 0, i32 2, i32 0 }, { i32, i32, i32, i32 } { i32 2, i32 2, i32 0, i32 0 }, { i32, i32, i32, i32 } { i32 3, i32 2, i32 0, i32 0 }]
; CHECK-NEXT: @__pmkit_ssapp_slots = private constant [2 x i32] [i32 32, i32 40]
; CHECK-NEXT: @__pmkit_ssapp_ptrs = private constant [1 x i32] [i32 24]
; CHECK-NEXT: @__pmkit_ssapp_name = private constant [5 x i8] c"incr\00"
; The id, the name, the recovery version, 64 frame bytes, 3 RISEs, the
; tables, the flags (1: compiler barriers), 1 pointer slot.
; SFENCE-NEXT: @__pmkit_ssapp_table = internal constant [1 x { i64, ptr, ptr, i32, i32, ptr, ptr, i32, i32, ptr }] [{ i64, ptr, ptr, i32, i32, ptr, ptr, i32, i32, ptr } { i64 -727412955023943601, ptr @__pmkit_ssapp_name, ptr @incr.ssapp.recover, i32 64, i32 3, ptr @__pmkit_ssapp_rises, ptr @__pmkit_ssapp_slots, i32 0, i32 1, ptr @__pmkit_ssapp_ptrs }]
; COMPILER-NEXT: @__pmkit_ssapp_table = internal constant [1 x { i64, ptr, ptr, i32, i32, ptr, ptr, i32, i32, ptr }] [{ i64, ptr, ptr, i32, i32, ptr, ptr, i32, i32, ptr } { i64 -727412955023943601, ptr @__pmkit_ssapp_name, ptr @incr.ssapp.recover, i32 64, i32 3, ptr @__pmkit_ssapp_rises, ptr @__pmkit_ssapp_slots, i32 1, i32 1, ptr @__pmkit_ssapp_ptrs }]
; CHECK-NEXT: @llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 65535, ptr @__pmkit_ssapp_ctor, ptr null }]

; CHECK-LABEL: define void @incr(
; CHECK-NEXT: ssapp.entry:
; CHECK-NEXT: [[FRAME:%[0-9]+]] = call ptr @__pmkit_ssapp_enter(i64 -727412955023943601, ptr %x)
; CHECK-NEXT: call void @__pmkit_ssapp_check_ptr(ptr %x, i32 1)
; CHECK-NEXT: [[XS:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 24
; CHECK-NEXT: store ptr %x, ptr [[XS]], align 8
; CHECK-NEXT: call void @__pmkit_ssapp_begin()
; CHECK-NEXT: br label %[[R1:[0-9]+]]
; RISE 1, read:
; CHECK: {{^}}[[R1]]:
; CHECK-NEXT: [[FLIP:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 16
; CHECK-NEXT: [[OLD:%[0-9]+]] = load volatile i64, ptr [[FLIP]], align 8
; CHECK-NEXT: [[X1:%[0-9]+]] = xor i64 [[OLD]], -9223372036854775808
; CHECK-NEXT: [[T:%[0-9]+]] = and i64 [[X1]], -9223372036854775808
; CHECK-NEXT: [[B1:%[0-9]+]] = or i64 1, [[T]]
; CHECK-NEXT: store volatile i64 [[B1]], ptr [[FRAME]], align 8
; CHECK-NEXT: store volatile i64 [[T]], ptr [[FLIP]], align 8
; CHECK-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: [[XS1:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 24
; CHECK-NEXT: [[X:%[0-9]+]] = load ptr, ptr [[XS1]], align 8
; CHECK-NEXT: %v = load i64, ptr [[X]], align 8
; CHECK-NEXT: %n = add i64 %v, 1
; CHECK-NEXT: [[LO32:%[0-9]+]] = trunc i64 %n to i32
; CHECK-NEXT: [[LO:%[0-9]+]] = zext i32 [[LO32]] to i64
; CHECK-NEXT: [[LOT:%[0-9]+]] = or i64 [[LO]], [[T]]
; CHECK-NEXT: [[S0:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 32
; CHECK-NEXT: store i64 [[LOT]], ptr [[S0]], align 8
; CHECK-NEXT: [[SH:%[0-9]+]] = lshr i64 %n, 32
; CHECK-NEXT: [[HI32:%[0-9]+]] = trunc i64 [[SH]] to i32
; CHECK-NEXT: [[HI:%[0-9]+]] = zext i32 [[HI32]] to i64
; CHECK-NEXT: [[HIT:%[0-9]+]] = or i64 [[HI]], [[T]]
; CHECK-NEXT: [[S1:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 40
; CHECK-NEXT: store i64 [[HIT]], ptr [[S1]], align 8
; SFENCE-NEXT: call void @llvm.x86.sse.sfence()
; COMPILER-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: br label %[[R2:[.a-z0-9]+]]
; RISE 2, write: no torn bit, the value rebuilt from its two slots.
; CHECK: {{^}}[[R2]]:
; CHECK-NEXT: store volatile i64 2, ptr [[FRAME]], align 8
; CHECK-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: [[G0:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 32
; CHECK-NEXT: [[W0:%[0-9]+]] = load i64, ptr [[G0]], align 8
; CHECK-NEXT: [[C0:%[0-9]+]] = trunc i64 [[W0]] to i32
; CHECK-NEXT: [[E0:%[0-9]+]] = zext i32 [[C0]] to i64
; CHECK-NEXT: [[G1:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 40
; CHECK-NEXT: [[W1:%[0-9]+]] = load i64, ptr [[G1]], align 8
; CHECK-NEXT: [[C1:%[0-9]+]] = trunc i64 [[W1]] to i32
; CHECK-NEXT: [[E1:%[0-9]+]] = zext i32 [[C1]] to i64
; CHECK-NEXT: [[U1:%[0-9]+]] = shl i64 [[E1]], 32
; CHECK-NEXT: [[N:%[0-9]+]] = or i64 [[E0]], [[U1]]
; CHECK-NEXT: [[XS2:%[0-9]+]] = getelementptr inbounds i8, ptr [[FRAME]], i64 24
; CHECK-NEXT: [[X2:%[0-9]+]] = load ptr, ptr [[XS2]], align 8
; CHECK-NEXT: store i64 [[N]], ptr [[X2]], align 8
; SFENCE-NEXT: call void @llvm.x86.sse.sfence()
; COMPILER-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: br label %[[R3:[.a-z0-9]+]]
; RISE 3, the exit call:
; CHECK: {{^}}[[R3]]:
; CHECK-NEXT: store volatile i64 3, ptr [[FRAME]], align 8
; CHECK-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: call void @__pmkit_ssapp_exit()
; SFENCE-NEXT: call void @llvm.x86.sse.sfence()
; COMPILER-NEXT: fence syncscope("singlethread") seq_cst
; CHECK-NEXT: ret void
; COMPILER-NOT: sfence
define void @incr(ptr %x) "pmkit.fase" {
  %v = load i64, ptr %x, align 8
  %n = add i64 %v, 1
  store i64 %n, ptr %x, align 8
  ret void
}

; CHECK-LABEL: define void @plain(
; CHECK-NEXT: %v = load i64, ptr %x, align 8
; CHECK-NEXT: %n = add i64 %v, 1
; CHECK-NEXT: store i64 %n, ptr %x, align 8
; CHECK-NEXT: ret void
define void @plain(ptr %x) {
  %v = load i64, ptr %x, align 8
  %n = add i64 %v, 1
  store i64 %n, ptr %x, align 8
  ret void
}

; The recovery version: the frame is its argument, the set-up is a switch.
; At RISE 1 (2); after it (3) or at RISE 2 (4): the write RISE; at RISE 3
; (6). A call or write RISE has no "after" (5 is missing).
; CHECK-LABEL: define internal void @incr.ssapp.recover(ptr %0, i64 %1) {
; CHECK-NEXT: ssapp.entry:
; CHECK-NEXT: getelementptr inbounds i8, ptr %0, i64 24
; CHECK-NEXT: switch i64 %1, label %ssapp.bad [
; CHECK-NEXT: i64 2, label %[[RR1:[0-9]+]]
; CHECK-NEXT: i64 3, label %[[RR2:[.a-z0-9]+]]
; CHECK-NEXT: i64 4, label %[[RR2]]
; CHECK-NEXT: i64 6, label %[[RR3:[.a-z0-9]+]]
; CHECK-NEXT: ]
; CHECK: {{^}}[[RR1]]:
; CHECK: {{^}}[[RR2]]:
; CHECK-NEXT: store volatile i64 2, ptr %0, align 8
; CHECK: {{^}}[[RR3]]:
; CHECK-NEXT: store volatile i64 3, ptr %0, align 8
; CHECK: ssapp.bad:
; CHECK-NEXT: unreachable

; CHECK-LABEL: define internal void @__pmkit_ssapp_ctor() {
; CHECK-NEXT: call void @__pmkit_ssapp_register(ptr @__pmkit_ssapp_table, i32 1)
; CHECK-NEXT: ret void

; REPORT:      pmkit-ssapp: FASE incr: 3 RISEs, frame 48 bytes{{$}}
; REPORT-NEXT:   RISE 1 read, 2 torn-bit slots{{$}}
; REPORT-NEXT:   RISE 2 write{{$}}
; REPORT-NEXT:   RISE 3 call{{$}}
; REPORT-NOT: plain
