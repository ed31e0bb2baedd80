; SPDX-License-Identifier: Apache-2.0
; pmkit-robust, base setting, around calls and what the program marks: a
; call that writes PM (pmkit_alloc storing the new block's pointer through
; its out argument into a PM field) is written back and fenced after the
; call -- all 8 bytes, from an address of unknown alignment; the same call
; with a stack slot gets nothing. The block it returns is PM, malloc's is
; DRAM. A library call that may write PM in a way the pass does not model
; (strcpy) is warned about, once, and not for a stack buffer. Stores inside
; PMKIT_ROBUST_IGNORE_BEGIN/END and in a PMKIT_ROBUST_IGNORE function
; (the markers and the attribute pmkit's headers produce) get nothing.
; Hand-written IR, not C: the call and its out argument, the markers and
; the attribute are what the pass reads, and each is written out here
; instead of depending on how clang and the headers spell them.
;
; RUN: %opt -passes=pmkit-robust -S %s 2>%t.err | %FileCheck %s
; RUN: %FileCheck %s --check-prefix=WARN --implicit-check-not=warning < %t.err
; RUN: %opt -S %s | %not %FileCheck %s

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

declare i32 @pmkit_alloc(ptr, i64, ptr)
declare ptr @malloc(i64)
declare ptr @strcpy(ptr, ptr)

; CHECK-LABEL: define void @link(
; CHECK-NEXT: %slot = alloca ptr, align 8
; CHECK-NEXT: %next = getelementptr inbounds i8, ptr %node, i64 8
; CHECK-NEXT: %r1 = call i32 @pmkit_alloc(ptr %pool, i64 32, ptr %next)
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %next)
; CHECK-NEXT: [[LAST:%[0-9]+]] = getelementptr i8, ptr %next, i64 7
; CHECK-NEXT: call void @llvm.x86.clwb(ptr [[LAST]])
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: %r2 = call i32 @pmkit_alloc(ptr %pool, i64 32, ptr %slot)
; CHECK-NEXT: %fresh = load ptr, ptr %slot, align 8
; CHECK-NEXT: store i64 5, ptr %fresh, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %fresh)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: %heap = call ptr @malloc(i64 16)
; CHECK-NEXT: store i64 6, ptr %heap, align 8
; CHECK-NEXT: ret void
define void @link(ptr %pool, ptr %node) {
  %slot = alloca ptr, align 8
  %next = getelementptr inbounds i8, ptr %node, i64 8
  %r1 = call i32 @pmkit_alloc(ptr %pool, i64 32, ptr %next)
  %r2 = call i32 @pmkit_alloc(ptr %pool, i64 32, ptr %slot)
  %fresh = load ptr, ptr %slot, align 8
  store i64 5, ptr %fresh, align 8
  %heap = call ptr @malloc(i64 16)
  store i64 6, ptr %heap, align 8
  ret void
}

; WARN: warning: {{.*}}in function name {{.*}}pmkit-robust: strcpy may write PM in a way robust mode does not model: its writes are not written back
; CHECK-LABEL: define void @name(
; CHECK-NEXT: %buf = alloca [16 x i8], align 1
; CHECK-NEXT: %a = call ptr @strcpy(ptr %buf, ptr %src)
; CHECK-NEXT: %b = call ptr @strcpy(ptr %pm, ptr %src)
; CHECK-NEXT: ret void
define void @name(ptr %pm, ptr %src) {
  %buf = alloca [16 x i8], align 1
  %a = call ptr @strcpy(ptr %buf, ptr %src)
  %b = call ptr @strcpy(ptr %pm, ptr %src)
  ret void
}

; CHECK-LABEL: define void @region(
; CHECK-NEXT: call void asm sideeffect "# pmkit.robust_ignore_begin"
; CHECK-NEXT: store i64 1, ptr %pm, align 8
; CHECK-NEXT: call void asm sideeffect "# pmkit.robust_ignore_end"
; CHECK-NEXT: %b = getelementptr inbounds i8, ptr %pm, i64 8
; CHECK-NEXT: store i64 2, ptr %b, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %b)
; CHECK-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
define void @region(ptr %pm) {
  call void asm sideeffect "# pmkit.robust_ignore_begin", "~{memory}"()
  store i64 1, ptr %pm, align 8
  call void asm sideeffect "# pmkit.robust_ignore_end", "~{memory}"()
  %b = getelementptr inbounds i8, ptr %pm, i64 8
  store i64 2, ptr %b, align 8
  ret void
}

; CHECK-LABEL: define void @ignored(
; CHECK-NEXT: store i64 3, ptr %pm, align 8
; CHECK-NEXT: ret void
define void @ignored(ptr %pm) "pmkit.robust_ignore" {
  store i64 3, ptr %pm, align 8
  ret void
}
