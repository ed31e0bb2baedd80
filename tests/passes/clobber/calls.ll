; SPDX-License-Identifier: Apache-2.0
; pmkit-clobber and the calls a FASE makes. pmkit_zalloc storing the new
; block's pointer into a PM field the FASE read is a clobber write: logged
; (8 bytes) before the call, written back after it. A memcpy over a field
; the FASE read is logged with its length. An external function the pass
; knows nothing about is refused, with the flag that allows it; allowed, it
; is taken to read what its argument points to, so a later store there is
; logged.
; Hand-written IR, not C: whether a call stays a call (pmkit_zalloc, a
; memcpy clang may turn into stores) and which arguments reach it are
; what the pass decides on, and C would let clang decide them.
;
; RUN: %not %opt -passes=pmkit-clobber -disable-output %s 2>&1 \
; RUN:   | %FileCheck %s --check-prefix=REFUSE --implicit-check-not=error:
; RUN: %opt -passes=pmkit-clobber -pmkit-clobber-allow=ext_hash -S %s \
; RUN:   | %FileCheck %s

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

declare i32 @pmkit_zalloc(ptr, i64, ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare i64 @ext_hash(ptr)

; CHECK-LABEL: define void @grow(
; CHECK: alloc:
; CHECK-NEXT: call void @__pmkit_clobber_log(ptr %head, i64 8)
; CHECK-NEXT: %e = call i32 @pmkit_zalloc(ptr %pool, i64 64, ptr %head)
; CHECK-NEXT: {{%[0-9]+}} = ptrtoint ptr %head to i64
; CHECK: call void @__pmkit_clobber_wb(ptr %head, i64 8)
define void @grow(ptr %pool, ptr %r) "pmkit.fase" {
  %head = getelementptr inbounds i8, ptr %r, i64 8
  %h = load ptr, ptr %head, align 8
  %c = icmp eq ptr %h, null
  br i1 %c, label %alloc, label %done
alloc:
  %e = call i32 @pmkit_zalloc(ptr %pool, i64 64, ptr %head)
  br label %done
done:
  ret void
}

; CHECK-LABEL: define void @copy(
; CHECK: cp:
; CHECK-NEXT: call void @__pmkit_clobber_log(ptr %r, i64 %n)
; CHECK-NEXT: call void @llvm.memcpy.p0.p0.i64(ptr %r, ptr %src, i64 %n, i1 false)
; CHECK: call void @__pmkit_clobber_wb(ptr %r, i64 %n)
define void @copy(ptr %r, ptr %src, i64 %n) "pmkit.fase" {
  %first = load i64, ptr %r, align 8
  %z = icmp eq i64 %first, 0
  br i1 %z, label %cp, label %done
cp:
  call void @llvm.memcpy.p0.p0.i64(ptr %r, ptr %src, i64 %n, i1 false)
  br label %done
done:
  ret void
}

; REFUSE: error: {{.*}}in function hashed {{.*}}pmkit-clobber: FASE hashed calls external function 'ext_hash' with unknown side effects: re-execution after a crash would repeat them. Make its source part of the build, or allow it with -pmkit-clobber-allow=ext_hash (pmkit cc --clobber-allow=ext_hash) if it writes no PM
; CHECK-LABEL: define void @hashed(
; CHECK: %h = call i64 @ext_hash(ptr %r)
; CHECK-NEXT: %b = getelementptr inbounds i8, ptr %r, i64 8
; CHECK-NEXT: call void @__pmkit_clobber_log(ptr %b, i64 8)
; CHECK-NEXT: store i64 %h, ptr %b, align 8
define void @hashed(ptr %r) "pmkit.fase" {
  %h = call i64 @ext_hash(ptr %r)
  %b = getelementptr inbounds i8, ptr %r, i64 8
  store i64 %h, ptr %b, align 8
  ret void
}

; CHECK: @__pmkit_clobber_register(ptr @__pmkit_clobber_table, i32 3)
