; SPDX-License-Identifier: Apache-2.0
; A FASE that calls a naked function: inlined, the callee's own ret ended the
; FASE in the middle and the program crashed; clobber and ssapp refuse it by
; name instead.
;
; RUN: %not %opt -passes=pmkit-clobber -disable-output %s 2>&1 | %FileCheck %s
; RUN: %not %opt -passes=pmkit-ssapp -disable-output %s 2>&1 | %FileCheck %s
; CHECK: error: {{.*}}in function bump {{.*}}FASE bump calls raw_add, which is naked: it cannot be made failure-atomic

target triple = "x86_64-unknown-linux-gnu"

define void @raw_add(ptr %p) naked {
  call void asm sideeffect "addq $$1, (%rdi)\0Aret", ""()
  unreachable
}

define void @bump(ptr %p) "pmkit.fase" {
  call void @raw_add(ptr %p)
  ret void
}
