; SPDX-License-Identifier: Apache-2.0
; pmkit-trace: where each event is said to come from. A location is
; "file:line:col" from the debug location, followed by the struct field the
; address names (from the debug type of the struct: "rec.b"), and for code
; inlined from elsewhere by where it was inlined ("<- file:line:col"); its
; id, the 32-bit FNV-1a of the text, goes with each event and the text into
; the module's table. Calls: one that may run traced code (a function of
; the module, or an unknown one) is bracketed by __pmkit_trace_enter (its
; call site) and __pmkit_trace_leave; read(), a library function that fills
; a buffer, is not bracketed but its buffer is recorded as a write of the
; bytes it returned, after it; a pool pointer given to an unknown function
; is reported before the call (__pmkit_trace_call).
; Hand-written IR, not C: this test is about locations, so it keeps the
; little debug information they come from, fixed here, where clang's would
; change with its version (columns, inlining, what -O1 merges).
;
; RUN: %opt -passes=pmkit-trace -S %s | %FileCheck %s

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

%struct.rec = type { i64, i64 }

declare i64 @read(i32, ptr, i64)
declare void @consume(ptr)

; The table, in the order the locations were first used.
; CHECK: @pmkit.trace.loc.str = private unnamed_addr constant [11 x i8] c"locs.c:3:6\00"
; CHECK-NEXT: @pmkit.trace.loc.str.1 = private unnamed_addr constant [17 x i8] c"locs.c:9:8 rec.b\00"
; CHECK-NEXT: @pmkit.trace.loc.str.2 = private unnamed_addr constant [26 x i8] c"locs.c:3:6 <- locs.c:10:3\00"
; CHECK-NEXT: @pmkit.trace.loc.str.3 = private unnamed_addr constant [12 x i8] c"locs.c:12:3\00"
; CHECK-NEXT: @pmkit.trace.loc.str.4 = private unnamed_addr constant [12 x i8] c"locs.c:13:3\00"
; CHECK-NEXT: @pmkit.trace.loc.str.5 = private unnamed_addr constant [12 x i8] c"locs.c:11:3\00"
; CHECK-NEXT: @pmkit.trace.locs = private constant [6 x { i32, ptr }] [{ i32, ptr } { i32 1812173946, ptr @pmkit.trace.loc.str }, { i32, ptr } { i32 -580584396, ptr @pmkit.trace.loc.str.1 }, { i32, ptr } { i32 -465763147, ptr @pmkit.trace.loc.str.2 }, { i32, ptr } { i32 2108758521, ptr @pmkit.trace.loc.str.3 }, { i32, ptr } { i32 -229442110, ptr @pmkit.trace.loc.str.4 }, { i32, ptr } { i32 -1723746900, ptr @pmkit.trace.loc.str.5 }]

; CHECK-LABEL: define void @helper(
; CHECK: call void @__pmkit_trace_store(ptr %p, i64 2, i32 8, i32 1812173946)
define void @helper(ptr %p) !dbg !12 {
  store i64 2, ptr %p, align 8, !dbg !13
  ret void
}

; CHECK-LABEL: define void @update(
; CHECK: call void @__pmkit_trace_store(ptr %b, i64 1, i32 8, i32 -580584396)
; CHECK: call void @__pmkit_trace_store(ptr %r, i64 3, i32 8, i32 -465763147)
; CHECK: store i64 3, ptr %r, align 8
; CHECK-NEXT: [[D1:%[0-9]+]] = call i32 @__pmkit_trace_enter(i32 -1723746900)
; CHECK-NEXT: call void @helper(ptr %r)
; CHECK-NEXT: call void @__pmkit_trace_leave(i32 [[D1]])
; CHECK-NEXT: %n = call i64 @read(i32 %fd, ptr %r, i64 16)
; CHECK-NEXT: {{%[0-9]+}} = ptrtoint ptr %r to i64
; CHECK: [[POS:%[0-9]+]] = icmp sgt i64 %n, 0
; CHECK-NEXT: [[LEN:%[0-9]+]] = select i1 [[POS]], i64 %n, i64 0
; CHECK-NEXT: call void @__pmkit_trace_write(ptr %r, ptr %r, i64 [[LEN]], i32 2108758521)
; CHECK: call void @__pmkit_trace_call(ptr %r, i32 -229442110)
; CHECK: [[D2:%[0-9]+]] = call i32 @__pmkit_trace_enter(i32 -229442110)
; CHECK-NEXT: call void @consume(ptr %r)
; CHECK-NEXT: call void @__pmkit_trace_leave(i32 [[D2]])
; CHECK-NEXT: ret void
define void @update(ptr %r, i32 %fd) !dbg !14 {
  %b = getelementptr inbounds %struct.rec, ptr %r, i64 0, i32 1
  store i64 1, ptr %b, align 8, !dbg !15
  store i64 3, ptr %r, align 8, !dbg !16
  call void @helper(ptr %r), !dbg !18
  %n = call i64 @read(i32 %fd, ptr %r, i64 16), !dbg !19
  call void @consume(ptr %r), !dbg !20
  ret void
}

; CHECK-LABEL: define internal void @pmkit.trace.ctor() {
; CHECK-NEXT: call void @__pmkit_trace_locs(ptr @pmkit.trace.locs, i32 6)

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}

!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, emissionKind: FullDebug)
!1 = !DIFile(filename: "locs.c", directory: "/src")
!2 = !{i32 2, !"Debug Info Version", i32 3}
; struct rec { long a, b; }, reached from the functions' parameter type.
!3 = !DICompositeType(tag: DW_TAG_structure_type, name: "rec", file: !1, line: 1, size: 128, elements: !4)
!4 = !{!5, !6}
!5 = !DIDerivedType(tag: DW_TAG_member, name: "a", scope: !3, file: !1, line: 1, baseType: !7, size: 64)
!6 = !DIDerivedType(tag: DW_TAG_member, name: "b", scope: !3, file: !1, line: 1, baseType: !7, size: 64, offset: 64)
!7 = !DIBasicType(name: "long", size: 64, encoding: DW_ATE_signed)
!8 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !3, size: 64)
!9 = !DISubroutineType(types: !{null, !8})
!12 = distinct !DISubprogram(name: "helper", scope: !1, file: !1, line: 2, type: !9, unit: !0, spFlags: DISPFlagDefinition)
!13 = !DILocation(line: 3, column: 6, scope: !12)
!14 = distinct !DISubprogram(name: "update", scope: !1, file: !1, line: 8, type: !9, unit: !0, spFlags: DISPFlagDefinition)
!15 = !DILocation(line: 9, column: 8, scope: !14)
; helper's store, as if inlined at line 10.
!16 = !DILocation(line: 3, column: 6, scope: !12, inlinedAt: !17)
!17 = !DILocation(line: 10, column: 3, scope: !14)
!18 = !DILocation(line: 11, column: 3, scope: !14)
!19 = !DILocation(line: 12, column: 3, scope: !14)
!20 = !DILocation(line: 13, column: 3, scope: !14)
