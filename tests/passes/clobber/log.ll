; SPDX-License-Identifier: Apache-2.0
; pmkit-clobber: which writes of a FASE are logged, and the code around
; them. A store that overwrites a value the FASE read (an input) gets
; __pmkit_clobber_log of its address and size just before it; so does an
; atomic RMW, which reads before it writes. A store no input read can
; precede, a store to another field than the one read and a store into the
; block the FASE allocated are not logged. Every write that may reach PM is
; written back when its address is inside the pools (__pmkit_pool_lo/hi);
; a store to the stack is neither logged nor written back. The outermost
; call of a FASE records its arguments and begins; each return commits.
; A function that is not a FASE is left alone.
; Hand-written IR, not C: the analysis sees the code the optimizer left,
; and C would let a change in clang or its pipeline (GVN, store merging)
; decide which reads and writes reach the pass.
;
; RUN: %opt -passes=pmkit-clobber -pmkit-clobber-report -S %s 2>%t.err \
; RUN:   | %FileCheck %s
; RUN: %FileCheck %s --check-prefix=REPORT < %t.err

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

declare i32 @pmkit_zalloc(ptr, i64, ptr)

; The id is the FNV-1a hash of the name, which recovery looks FASEs up by.
; CHECK-LABEL: define void @bump(
; CHECK-NEXT: [[OUTER:%[0-9]+]] = call i32 @__pmkit_clobber_enter(i64 -14119258795989899)
; CHECK-NEXT: [[IS:%[0-9]+]] = icmp ne i32 [[OUTER]], 0
; CHECK-NEXT: br i1 [[IS]], label %[[ARGS:[0-9]+]], label %[[BODY:[0-9]+]]
; CHECK: {{^}}[[ARGS]]:
; CHECK-NEXT: call void @__pmkit_clobber_arg_ptr(ptr %r)
; CHECK-NEXT: call void @__pmkit_clobber_begin()
; CHECK-NEXT: br label %[[BODY]]
; CHECK: {{^}}[[BODY]]:
; CHECK-NEXT: %v = load i64, ptr %r, align 8
; CHECK-NEXT: %n = add i64 %v, 1
; CHECK-NEXT: call void @__pmkit_clobber_log(ptr %r, i64 8)
; CHECK-NEXT: store i64 %n, ptr %r, align 8
; CHECK-NEXT: [[A:%[0-9]+]] = ptrtoint ptr %r to i64
; CHECK-NEXT: [[LO:%[0-9]+]] = load i64, ptr @__pmkit_pool_lo, align 8
; CHECK-NEXT: [[GE:%[0-9]+]] = icmp uge i64 [[A]], [[LO]]
; CHECK-NEXT: [[HI:%[0-9]+]] = load i64, ptr @__pmkit_pool_hi, align 8
; CHECK-NEXT: [[LT:%[0-9]+]] = icmp ult i64 [[A]], [[HI]]
; CHECK-NEXT: [[IN:%[0-9]+]] = and i1 [[GE]], [[LT]]
; CHECK-NEXT: br i1 [[IN]], label %[[WB:[0-9]+]], label %[[DONE:[0-9]+]]
; CHECK: {{^}}[[WB]]:
; CHECK-NEXT: call void @__pmkit_clobber_wb(ptr %r, i64 8)
; CHECK-NEXT: br label %[[DONE]]
; CHECK: {{^}}[[DONE]]:
; CHECK-NEXT: call void @__pmkit_clobber_exit()
; CHECK-NEXT: ret void
define void @bump(ptr %r) "pmkit.fase" {
  %v = load i64, ptr %r, align 8
  %n = add i64 %v, 1
  store i64 %n, ptr %r, align 8
  ret void
}

; CHECK-LABEL: define void @blind(
; CHECK: call void @__pmkit_clobber_arg_ptr(ptr %r)
; CHECK-NEXT: call void @__pmkit_clobber_arg(i64 %v)
; CHECK-NEXT: call void @__pmkit_clobber_begin()
; CHECK-NOT: __pmkit_clobber_log
; CHECK: store i64 %v, ptr %r, align 8
; CHECK: call void @__pmkit_clobber_wb(ptr %r, i64 8)
; CHECK-NOT: __pmkit_clobber_log
; CHECK: store i64 %v, ptr %local, align 8
; CHECK-NEXT: call void @__pmkit_clobber_exit()
; CHECK-NEXT: ret void
define void @blind(ptr %r, i64 %v) "pmkit.fase" {
  %local = alloca i64, align 8
  store i64 %v, ptr %r, align 8
  store i64 %v, ptr %local, align 8
  ret void
}

; CHECK-LABEL: define void @other_field(
; CHECK-NOT: __pmkit_clobber_log
; CHECK: store i64 %v, ptr %b, align 8
; CHECK: call void @__pmkit_clobber_wb(ptr %b, i64 8)
; CHECK-NOT: __pmkit_clobber_log
; CHECK: ret void
define void @other_field(ptr %r) "pmkit.fase" {
  %v = load i64, ptr %r, align 8
  %b = getelementptr inbounds i8, ptr %r, i64 8
  store i64 %v, ptr %b, align 8
  ret void
}

; CHECK-LABEL: define void @fresh(
; CHECK: %e = call i32 @pmkit_zalloc(ptr %pool, i64 16, ptr %slot)
; CHECK-NEXT: %n = load ptr, ptr %slot, align 8
; CHECK-NEXT: %old = load ptr, ptr %r, align 8
; CHECK-NEXT: store ptr %old, ptr %n, align 8
; CHECK: call void @__pmkit_clobber_wb(ptr %n, i64 8)
; CHECK-NOT: __pmkit_clobber_wb
; CHECK: call void @__pmkit_clobber_log(ptr %r, i64 8)
; CHECK-NEXT: store ptr %n, ptr %r, align 8
; CHECK: call void @__pmkit_clobber_wb(ptr %r, i64 8)
define void @fresh(ptr %pool, ptr %r) "pmkit.fase" {
  %slot = alloca ptr, align 8
  %e = call i32 @pmkit_zalloc(ptr %pool, i64 16, ptr %slot)
  %n = load ptr, ptr %slot, align 8
  %old = load ptr, ptr %r, align 8
  store ptr %old, ptr %n, align 8
  store ptr %n, ptr %r, align 8
  ret void
}

; CHECK-LABEL: define i64 @count(
; CHECK: call void @__pmkit_clobber_log(ptr %c, i64 8)
; CHECK-NEXT: %o = atomicrmw add ptr %c, i64 1 seq_cst, align 8
; CHECK: call void @__pmkit_clobber_wb(ptr %c, i64 8)
; CHECK: call void @__pmkit_clobber_exit()
; CHECK-NEXT: ret i64 %o
define i64 @count(ptr %c) "pmkit.fase" {
  %o = atomicrmw add ptr %c, i64 1 seq_cst, align 8
  ret i64 %o
}

; CHECK-LABEL: define void @plain(
; CHECK-NEXT: %v = load i64, ptr %r, align 8
; CHECK-NEXT: %n = add i64 %v, 1
; CHECK-NEXT: store i64 %n, ptr %r, align 8
; CHECK-NEXT: ret void
define void @plain(ptr %r) {
  %v = load i64, ptr %r, align 8
  %n = add i64 %v, 1
  store i64 %n, ptr %r, align 8
  ret void
}

; The report: each write of each FASE, with the reason.
; REPORT:      pmkit-clobber: bump{{$}}
; REPORT-NEXT: pmkit-clobber:   bump (no debug info): store: logged: clobbers an input read (load at bump (no debug info)){{$}}
; REPORT-NEXT: pmkit-clobber: blind{{$}}
; REPORT-NEXT: pmkit-clobber:   blind (no debug info): store: not logged: no input read can precede it{{$}}
; REPORT-NEXT: pmkit-clobber:   blind (no debug info): store: not logged: stack or global memory{{$}}
; REPORT-NEXT: pmkit-clobber: other_field{{$}}
; REPORT-NEXT: pmkit-clobber:   other_field (no debug info): store: not logged: no input read can precede it{{$}}
; REPORT-NEXT: pmkit-clobber: fresh{{$}}
; REPORT-NEXT: pmkit-clobber:   fresh (no debug info): call: not logged: stack or global memory{{$}}
; REPORT-NEXT: pmkit-clobber:   fresh (no debug info): store: not logged: memory this FASE allocated{{$}}
; REPORT-NEXT: pmkit-clobber:   fresh (no debug info): store: logged: clobbers an input read (load at fresh (no debug info)){{$}}
; REPORT-NEXT: pmkit-clobber: count{{$}}
; REPORT-NEXT: pmkit-clobber:   count (no debug info): atomicrmw: logged: clobbers an input read (atomicrmw at count (no debug info)){{$}}
; REPORT-NOT: plain
