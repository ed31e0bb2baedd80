; SPDX-License-Identifier: Apache-2.0
; pmkit-arp's three lowerings of a persistent release and of sequence
; points, on the calls pmkit::atomic and pmkit::sequence_point make. Every
; store that may reach PM gets a clwb right after it (a memcpy a range
; write-back); a store to the stack gets nothing. arp: no fence after the
; clwb, an sfence in place of a persistent release or sequence point, none
; for a volatile one. epoch: an mfence at every sync call, volatile or not.
; scp: clwb + sfence after every PM write and nothing at the sync calls.
; The __pmkit_arp_* calls are removed, unless the program is traced
; (-pmkit-trace), when they stay after their fence.
; Hand-written IR, not C++: the sync calls, with their flags as constants,
; and the stores around them are the pass's whole input, and the C++
; templates of arp.hpp and clang's inlining would decide where they land.
;
; RUN: %opt -passes=pmkit-arp -S %s \
; RUN:   | %FileCheck %s --check-prefixes=CHECK,ARP --implicit-check-not='call void @__pmkit_arp_'
; RUN: %opt -passes=pmkit-arp -pmkit-arp-lowering=epoch -S %s \
; RUN:   | %FileCheck %s --check-prefixes=CHECK,EPOCH --implicit-check-not='call void @__pmkit_arp_'
; RUN: %opt -passes=pmkit-arp -pmkit-arp-lowering=scp -S %s \
; RUN:   | %FileCheck %s --check-prefixes=CHECK,SCP --implicit-check-not='call void @__pmkit_arp_'
; RUN: %opt -passes=pmkit-arp -pmkit-trace -S %s \
; RUN:   | %FileCheck %s --check-prefix=TRACED

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

declare void @__pmkit_arp_release(ptr, i64, i32, i32)
declare void @__pmkit_arp_seqpoint(i32)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

; pmkit::atomic<long>::store(1, release): the call, then the atomic store.
; CHECK-LABEL: define void @publish(
; CHECK-SAME: #[[CLWB:[0-9]+]]
; CHECK-NEXT: %tmp = alloca i64, align 8
; CHECK-NEXT: store i64 %v, ptr %rec, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %rec)
; SCP-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: store i64 %v, ptr %tmp, align 8
; ARP-NEXT: call void @llvm.x86.sse.sfence()
; EPOCH-NEXT: call void @llvm.x86.sse2.mfence()
; CHECK-NEXT: store atomic i64 1, ptr %ready release, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %ready)
; SCP-NEXT: call void @llvm.x86.sse.sfence()
; CHECK-NEXT: ret void
; TRACED-LABEL: define void @publish(
; TRACED: call void @llvm.x86.sse.sfence()
; TRACED-NEXT: call void @__pmkit_arp_release(ptr %ready, i64 1, i32 8, i32 0)
; TRACED-NEXT: store atomic i64 1, ptr %ready release, align 8
define void @publish(ptr %rec, ptr %ready, i64 %v) {
  %tmp = alloca i64, align 8
  store i64 %v, ptr %rec, align 8
  store i64 %v, ptr %tmp, align 8
  call void @__pmkit_arp_release(ptr %ready, i64 1, i32 8, i32 0)
  store atomic i64 1, ptr %ready release, align 8
  ret void
}

; pmkit::sequence_point(), persistent (0) then volatile (1).
; CHECK-LABEL: define void @ordered(
; CHECK-NEXT: call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %src, i64 %n, i1 false)
; CHECK-NEXT: call void @__pmkit_flush_range(ptr %a, i64 %n)
; SCP-NEXT: call void @llvm.x86.sse.sfence()
; ARP-NEXT: call void @llvm.x86.sse.sfence()
; EPOCH-NEXT: call void @llvm.x86.sse2.mfence()
; CHECK-NEXT: store i64 2, ptr %b, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %b)
; SCP-NEXT: call void @llvm.x86.sse.sfence()
; EPOCH-NEXT: call void @llvm.x86.sse2.mfence()
; CHECK-NEXT: ret void
; TRACED-LABEL: define void @ordered(
; TRACED: call void @llvm.x86.sse.sfence()
; TRACED-NEXT: call void @__pmkit_arp_seqpoint(i32 0)
; TRACED: call void @llvm.x86.clwb(ptr %b)
; TRACED-NEXT: call void @__pmkit_arp_seqpoint(i32 1)
; TRACED-NEXT: ret void
define void @ordered(ptr %a, ptr %b, ptr %src, i64 %n) {
  call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %src, i64 %n, i1 false)
  call void @__pmkit_arp_seqpoint(i32 0)
  store i64 2, ptr %b, align 8
  call void @__pmkit_arp_seqpoint(i32 1)
  ret void
}

; No PM write and no sync: unchanged, and no clwb feature.
; CHECK-LABEL: define i64 @reader(
; CHECK-SAME: ptr %p) {
; CHECK-NEXT: %l = alloca i64, align 8
; CHECK-NEXT: %v = load i64, ptr %p, align 8
; CHECK-NEXT: store i64 %v, ptr %l, align 8
; CHECK-NEXT: ret i64 %v
define i64 @reader(ptr %p) {
  %l = alloca i64, align 8
  %v = load i64, ptr %p, align 8
  store i64 %v, ptr %l, align 8
  ret i64 %v
}

; CHECK: attributes #[[CLWB]] = { "target-features"="+clwb" }
