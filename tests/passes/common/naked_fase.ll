; SPDX-License-Identifier: Apache-2.0
; A FASE that must not be instrumented (naked) cannot be made failure-atomic:
; clobber and ssapp mode refuse it with an error naming it, rather than leave
; it as it is and let the program believe it is failure-atomic.
;
; RUN: %not %opt -passes=pmkit-clobber -disable-output %s 2>&1 | %FileCheck %s -DPASS=pmkit-clobber
; RUN: %not %opt -passes=pmkit-ssapp -disable-output %s 2>&1 | %FileCheck %s -DPASS=pmkit-ssapp
; CHECK: error: {{.*}}in function update {{.*}}[[PASS]]: FASE update is naked: it cannot be made failure-atomic

target triple = "x86_64-unknown-linux-gnu"

define void @update(ptr %p) naked "pmkit.fase" {
  call void asm sideeffect "movq $$1, (%rdi)", ""()
  unreachable
}

