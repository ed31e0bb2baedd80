; SPDX-License-Identifier: Apache-2.0
; pmkit-arp and the flags of a sync call (PMKIT_SYNC_*: 1 volatile, 2 RMW,
; 4 failed). Under arp an acquire and a volatile release need no fence
; (x86-TSO keeps a load before later stores; a volatile sync orders no
; persists), a persistent RMW release gets an sfence; under epoch every
; sync gets an mfence, except the news that a compare-exchange failed,
; which is no sync at all. Atomic stores and RMWs on PM are written back;
; an atomic load is not. A sync call made with invoke (from C++ code with
; a cleanup) becomes a branch to its normal destination.
; Hand-written IR, not C++: the flag values and the invoke are what the
; pass reads, and C++ would leave them to arp.hpp's templates and to
; clang's exception handling.
;
; RUN: %opt -passes=pmkit-arp -S %s \
; RUN:   | %FileCheck %s --check-prefixes=CHECK,ARP \
; RUN:       --implicit-check-not='call void @__pmkit_arp_' --implicit-check-not=invoke
; RUN: %opt -passes=pmkit-arp -pmkit-arp-lowering=epoch -S %s \
; RUN:   | %FileCheck %s --check-prefixes=CHECK,EPOCH \
; RUN:       --implicit-check-not='call void @__pmkit_arp_' --implicit-check-not=invoke

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

declare void @__pmkit_arp_release(ptr, i64, i32, i32)
declare void @__pmkit_arp_acquire(ptr, i64, i32, i32)
declare i32 @__gxx_personality_v0(...)

; q->store(v, release, volatile_sync); q->load(acquire)
; CHECK-LABEL: define i64 @handoff(
; EPOCH-NEXT: call void @llvm.x86.sse2.mfence()
; CHECK-NEXT: store atomic i64 %v, ptr %q release, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %q)
; CHECK-NEXT: %r = load atomic i64, ptr %q acquire, align 8
; EPOCH-NEXT: call void @llvm.x86.sse2.mfence()
; CHECK-NEXT: ret i64 %r
define i64 @handoff(ptr %q, i64 %v) {
  call void @__pmkit_arp_release(ptr %q, i64 %v, i32 8, i32 1)
  store atomic i64 %v, ptr %q release, align 8
  %r = load atomic i64, ptr %q acquire, align 8
  call void @__pmkit_arp_acquire(ptr %q, i64 %r, i32 8, i32 0)
  ret i64 %r
}

; w->compare_exchange_strong(e, n, acq_rel, relaxed): on failure, the
; release did not happen (acquire with flags RMW | failed).
; CHECK-LABEL: define i1 @swap(
; ARP-NEXT: call void @llvm.x86.sse.sfence()
; EPOCH-NEXT: call void @llvm.x86.sse2.mfence()
; CHECK-NEXT: %p = cmpxchg ptr %w, i64 %e, i64 %n acq_rel monotonic, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %w)
; CHECK: {{^}}failed:
; CHECK-NEXT: br label %done
define i1 @swap(ptr %w, i64 %e, i64 %n) {
  call void @__pmkit_arp_release(ptr %w, i64 %n, i32 8, i32 2)
  %p = cmpxchg ptr %w, i64 %e, i64 %n acq_rel monotonic, align 8
  %ok = extractvalue { i64, i1 } %p, 1
  %seen = extractvalue { i64, i1 } %p, 0
  br i1 %ok, label %done, label %failed
failed:
  call void @__pmkit_arp_acquire(ptr %w, i64 %seen, i32 8, i32 6)
  br label %done
done:
  ret i1 %ok
}

; CHECK-LABEL: define void @unwinds(
; ARP-NEXT: call void @llvm.x86.sse.sfence()
; EPOCH-NEXT: call void @llvm.x86.sse2.mfence()
; CHECK-NEXT: br label %ok
; CHECK: {{^}}ok:
; CHECK-NEXT: store atomic i64 0, ptr %w release, align 8
; CHECK-NEXT: call void @llvm.x86.clwb(ptr %w)
; CHECK-NEXT: ret void
define void @unwinds(ptr %w) personality ptr @__gxx_personality_v0 {
  invoke void @__pmkit_arp_release(ptr %w, i64 0, i32 8, i32 0)
          to label %ok unwind label %lp
ok:
  store atomic i64 0, ptr %w release, align 8
  ret void
lp:
  %x = landingpad { ptr, i32 } cleanup
  resume { ptr, i32 } %x
}
