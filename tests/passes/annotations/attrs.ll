; SPDX-License-Identifier: Apache-2.0
; pmkit-annotations attaches one string attribute per pmkit annotation (and
; noinline to a PM allocator, so that its calls stay visible), keeps
; the function's other attributes, and leaves unannotated functions and
; non-pmkit annotations alone.
;
; RUN: %opt -passes=pmkit-annotations -S %s | %FileCheck %s
; Running it twice changes nothing more:
; RUN: %opt -passes=pmkit-annotations,pmkit-annotations -S %s | %FileCheck %s
; clang's O0 and O2 pipelines run it at pipeline start:
; RUN: %opt -passes='default<O0>' -S %s | %FileCheck %s
; The checks fail on the input itself, so they test the pass, not the input:
; RUN: %opt -S %s | %not %FileCheck %s
; A pattern claiming @plain got an attribute fails:
; RUN: %opt -passes=pmkit-annotations -S %s \
; RUN:   | %not %FileCheck %s --check-prefix=BAD

@.str.fase = private unnamed_addr constant [11 x i8] c"pmkit.fase\00", section "llvm.metadata"
@.str.alloc = private unnamed_addr constant [19 x i8] c"pmkit.pm_allocator\00", section "llvm.metadata"
@.str.ignore = private unnamed_addr constant [20 x i8] c"pmkit.robust_ignore\00", section "llvm.metadata"
@.str.other = private unnamed_addr constant [11 x i8] c"other.tool\00", section "llvm.metadata"
@.str.file = private unnamed_addr constant [8 x i8] c"attrs.c\00", section "llvm.metadata"
@llvm.global.annotations = appending global [5 x { ptr, ptr, ptr, i32, ptr }] [
  { ptr, ptr, ptr, i32, ptr } { ptr @fase_fn, ptr @.str.fase, ptr @.str.file, i32 1, ptr null },
  { ptr, ptr, ptr, i32, ptr } { ptr @alloc_fn, ptr @.str.alloc, ptr @.str.file, i32 2, ptr null },
  { ptr, ptr, ptr, i32, ptr } { ptr @ignore_fn, ptr @.str.ignore, ptr @.str.file, i32 3, ptr null },
  { ptr, ptr, ptr, i32, ptr } { ptr @fase_fn, ptr @.str.ignore, ptr @.str.file, i32 1, ptr null },
  { ptr, ptr, ptr, i32, ptr } { ptr @other_fn, ptr @.str.other, ptr @.str.file, i32 4, ptr null }
], section "llvm.metadata"

; CHECK-LABEL: define void @fase_fn()
; CHECK-SAME: #[[FASE:[0-9]+]]
define void @fase_fn() #0 {
  ret void
}

; CHECK-LABEL: define ptr @alloc_fn(i64 %n)
; CHECK-SAME: #[[ALLOC:[0-9]+]]
define ptr @alloc_fn(i64 %n) #1 {
  ret ptr null
}

; CHECK-LABEL: define void @ignore_fn()
; CHECK-SAME: #[[IGNORE:[0-9]+]]
define void @ignore_fn() #1 {
  ret void
}

; CHECK-LABEL: define void @other_fn()
; CHECK-SAME: #[[OTHER:[0-9]+]]
define void @other_fn() #2 {
  ret void
}

; CHECK-LABEL: define void @plain()
; CHECK-SAME: #[[PLAIN:[0-9]+]]
; BAD: define void @plain() #[[P:[0-9]+]]
define void @plain() #0 {
  ret void
}

; Whole attribute sets, so any extra or missing attribute is caught.
; CHECK-DAG: attributes #[[FASE]] = { noinline nounwind "pmkit.fase" "pmkit.robust_ignore" }
; CHECK-DAG: attributes #[[ALLOC]] = { noinline nounwind "pmkit.pm_allocator" }
; CHECK-DAG: attributes #[[IGNORE]] = { nounwind "pmkit.robust_ignore" }
; CHECK-DAG: attributes #[[OTHER]] = { nounwind uwtable }
; CHECK-DAG: attributes #[[PLAIN]] = { noinline nounwind }
; BAD: attributes #[[P]] = { {{.*}}"pmkit.
attributes #0 = { noinline nounwind }
attributes #1 = { nounwind }
attributes #2 = { nounwind uwtable }
