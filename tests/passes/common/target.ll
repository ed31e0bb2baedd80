; SPDX-License-Identifier: Apache-2.0
; What every pass asks first (passes/Common/Target.h). A function that must
; not be instrumented (naked, disable_sanitizer_instrumentation) is left as
; it is, and robust mode says so instead of letting its stores go unordered
; in silence; the ordinary function beside them is instrumented (the control
; that shows the pass ran). A target other than x86-64 is refused by every
; pass that emits or states x86-64 persistency, before it changes anything.
;
; RUN: %opt -passes=pmkit-robust -S %s 2>%t.err | %FileCheck %s
; RUN: %FileCheck %s --check-prefix=WARN < %t.err
; RUN: %opt -passes=pmkit-arp -disable-output %s 2>&1 | %FileCheck %s --check-prefix=ARPWARN
; RUN: sed 's/^target triple = .*/target triple = "aarch64-unknown-linux-gnu"/' %s > %t.arm.ll
; RUN: %not %opt -passes=pmkit-robust -disable-output %t.arm.ll 2>&1 | %FileCheck %s --check-prefix=ARM -DPASS=pmkit-robust
; RUN: %not %opt -passes=pmkit-trace -disable-output %t.arm.ll 2>&1 | %FileCheck %s --check-prefix=ARM -DPASS=pmkit-trace
; RUN: %not %opt -passes=pmkit-clobber -disable-output %t.arm.ll 2>&1 | %FileCheck %s --check-prefix=ARM -DPASS=pmkit-clobber
; RUN: %not %opt -passes=pmkit-ssapp -disable-output %t.arm.ll 2>&1 | %FileCheck %s --check-prefix=ARM -DPASS=pmkit-ssapp
; RUN: %not %opt -passes=pmkit-arp -disable-output %t.arm.ll 2>&1 | %FileCheck %s --check-prefix=ARM -DPASS=pmkit-arp

target triple = "x86_64-unknown-linux-gnu"

; CHECK-LABEL: define void @plain(
; CHECK: call void @llvm.x86.clwb
; CHECK: call void @llvm.x86.sse.sfence()
define void @plain(ptr %p) {
  store i64 1, ptr %p, align 8
  ret void
}

; CHECK-LABEL: define void @san(
; CHECK-NEXT: store i64 1, ptr %p, align 8
; CHECK-NEXT: ret void
define void @san(ptr %p) disable_sanitizer_instrumentation {
  store i64 1, ptr %p, align 8
  ret void
}

; CHECK-LABEL: define void @raw(
; CHECK-NEXT: call void asm sideeffect
; CHECK-NEXT: unreachable
define void @raw(ptr %p) naked {
  call void asm sideeffect "movq $$1, (%rdi)", ""()
  unreachable
}

; WARN: warning: {{.*}}in function san {{.*}}pmkit-robust: san is disable_sanitizer_instrumentation: no write-back or fence is inserted in it, so its stores to PM are not made robust
; WARN: warning: {{.*}}in function raw {{.*}}pmkit-robust: raw is naked: no write-back or fence is inserted in it

; ARM: error: [[PASS]]: the target aarch64-unknown-linux-gnu is not supported: pmkit emits x86-64 write-backs and fences (clwb, sfence) and states its guarantees for x86-64 only

; ARPWARN: warning: {{.*}}in function san {{.*}}pmkit-arp: san is disable_sanitizer_instrumentation: its pmkit::atomic operations are not lowered and its stores to PM not written back
; ARPWARN: warning: {{.*}}in function raw {{.*}}pmkit-arp: raw is naked
