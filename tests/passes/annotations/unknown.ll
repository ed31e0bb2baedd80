; SPDX-License-Identifier: Apache-2.0
; An unknown pmkit.* string, and a pmkit annotation on something other than a
; function, each give one warning naming the symbol and the string and attach
; nothing; annotations of other tools give no warning.
;
; RUN: %opt -passes=pmkit-annotations -S %s -o %t.ll 2>&1 \
; RUN:   | %FileCheck %s --check-prefix=WARN --implicit-check-not=warning
; RUN: %FileCheck %s --input-file=%t.ll --implicit-check-not='"pmkit.'

; WARN: warning: {{.*}}in function typo_fn {{.*}}pmkit-annotations: unknown annotation 'pmkit.fasee' on function 'typo_fn' ignored (known: pmkit.fase pmkit.pm_allocator pmkit.robust_ignore)
; WARN: warning: pmkit-annotations: annotation 'pmkit.fase' on 'counter' ignored: pmkit annotations apply to functions only

@.str.typo = private unnamed_addr constant [12 x i8] c"pmkit.fasee\00", section "llvm.metadata"
@.str.fase = private unnamed_addr constant [11 x i8] c"pmkit.fase\00", section "llvm.metadata"
@.str.other = private unnamed_addr constant [10 x i8] c"pmkitfase\00", section "llvm.metadata"
@.str.file = private unnamed_addr constant [10 x i8] c"unknown.c\00", section "llvm.metadata"
@counter = global i32 0, align 4
@llvm.global.annotations = appending global [3 x { ptr, ptr, ptr, i32, ptr }] [
  { ptr, ptr, ptr, i32, ptr } { ptr @typo_fn, ptr @.str.typo, ptr @.str.file, i32 1, ptr null },
  { ptr, ptr, ptr, i32, ptr } { ptr @counter, ptr @.str.fase, ptr @.str.file, i32 2, ptr null },
  { ptr, ptr, ptr, i32, ptr } { ptr @other_fn, ptr @.str.other, ptr @.str.file, i32 3, ptr null }
], section "llvm.metadata"

; The IR is unchanged: no pmkit attribute anywhere (--implicit-check-not)
; except in the annotation strings themselves.
; CHECK: c"pmkit.fasee\00"
; CHECK: c"pmkit.fase\00"
; CHECK-LABEL: define void @typo_fn()
; CHECK-SAME: #[[TYPO:[0-9]+]]
define void @typo_fn() #0 {
  ret void
}

; CHECK-LABEL: define void @other_fn()
; CHECK-SAME: #[[TYPO]]
define void @other_fn() #0 {
  ret void
}

; CHECK: attributes #[[TYPO]] = { noinline nounwind }
attributes #0 = { noinline nounwind }
