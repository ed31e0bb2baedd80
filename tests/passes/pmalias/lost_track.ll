; SPDX-License-Identifier: Apache-2.0
; pmkit-pmalias never turns a pointer it lost track of into DRAM, and
; follows calls through aliases. A PM
; pointer copied through memory as an i128 (two pointers at once) keeps its
; source; one copied as two i32 halves has no source the analysis follows,
; and is "may be PM" for that reason. A pointer that is only ever null stays
; DRAM (the store through it never runs).
;
; RUN: %opt -passes=pmkit-pmalias -disable-output %s | %FileCheck %s
; The checks fail on a printer that says DRAM:
; RUN: %opt -passes=pmkit-pmalias -disable-output %s | sed 's/: PM /: DRAM /' \
; RUN:   | %not %FileCheck %s

; CHECK: wide: PM {{.*}}store i64 1{{.*}}; pmkit_alloc at
; CHECK: halves: PM {{.*}}store i64 2{{.*}}; unknown memory (no source found for the pointer)
; CHECK: null: DRAM {{.*}}store i64 3
; A constructor called through its alias (C1 -> C2, as clang emits them)
; is a direct call: `this` keeps its source.
; CHECK: ctor_base: PM {{.*}}store i64 4{{.*}}; pmkit_alloc at

declare i32 @pmkit_alloc(ptr, i64, ptr)

define void @wide(ptr %pool) {
  %slot = alloca ptr
  %t1 = alloca i128
  %t2 = alloca i128
  call i32 @pmkit_alloc(ptr %pool, i64 64, ptr %slot)
  %pm = load ptr, ptr %slot
  store ptr %pm, ptr %t1
  %w = load i128, ptr %t1
  store i128 %w, ptr %t2
  %back = load ptr, ptr %t2
  store i64 1, ptr %back
  ret void
}

define void @halves(ptr %pool) {
  %slot = alloca ptr
  %t = alloca ptr
  call i32 @pmkit_alloc(ptr %pool, i64 64, ptr %slot)
  %pm = load ptr, ptr %slot
  %i = ptrtoint ptr %pm to i64
  %lo = trunc i64 %i to i32
  %s = lshr i64 %i, 32
  %hi = trunc i64 %s to i32
  store i32 %lo, ptr %t
  %t.hi = getelementptr i8, ptr %t, i64 4
  store i32 %hi, ptr %t.hi
  %back = load ptr, ptr %t
  store i64 2, ptr %back
  ret void
}

define void @null() {
  store i64 3, ptr null
  ret void
}

@ctor_complete = internal alias void (ptr), ptr @ctor_base

define internal void @ctor_base(ptr %this) {
  store i64 4, ptr %this
  ret void
}

define void @construct(ptr %pool) personality ptr null {
  %slot = alloca ptr
  call i32 @pmkit_alloc(ptr %pool, i64 64, ptr %slot)
  %obj = load ptr, ptr %slot
  invoke void @ctor_complete(ptr %obj) to label %ok unwind label %bad
ok:
  ret void
bad:
  %lp = landingpad { ptr, i32 } cleanup
  resume { ptr, i32 } %lp
}
