// SPDX-License-Identifier: Apache-2.0
// The three lowerings of pmkit-arp on one function: a PM store written back
// with clwb; a persistent release preceded by an sfence (arp), an mfence
// (epoch) or nothing (scp, whose stores each get clwb + sfence); a
// volatile release and an acquire with no fence under arp; the
// __pmkit_arp_* calls gone unless the program is traced.
//
// RUN: %clang_pm -O1 -S -emit-llvm -mllvm -pmkit-mode=arp %s -o - \
// RUN:   | %FileCheck %s --check-prefix=ARP
// RUN: %clang_pm -O1 -S -emit-llvm -mllvm -pmkit-mode=arp \
// RUN:   -mllvm -pmkit-arp-lowering=epoch %s -o - \
// RUN:   | %FileCheck %s --check-prefix=EPOCH
// RUN: %clang_pm -O1 -S -emit-llvm -mllvm -pmkit-mode=arp \
// RUN:   -mllvm -pmkit-arp-lowering=scp %s -o - \
// RUN:   | %FileCheck %s --check-prefix=SCP
// RUN: %clang_pm -O1 -S -emit-llvm -mllvm -pmkit-mode=arp -mllvm -pmkit-trace \
// RUN:   %s -o - | %FileCheck %s --check-prefix=TRACED

#include <pmkit/arp.hpp>
#include <pmkit/pmkit.h>

struct Rec {
  long data;
  pmkit::atomic<long> ready;
};

// ARP-LABEL: define {{.*}}publish
// ARP: store i64 %{{.*}}, ptr %[[R:[a-z0-9.]+]]
// ARP-NEXT: call void @llvm.x86.clwb(ptr %[[R]])
// ARP: call void @llvm.x86.sse.sfence()
// ARP-NEXT: store atomic i64 1, ptr %{{.*}} release
// ARP-NOT: __pmkit_arp
// ARP-LABEL: ret void
// EPOCH-LABEL: define {{.*}}publish
// EPOCH: call void @llvm.x86.clwb
// EPOCH-NOT: sfence
// EPOCH: call void @llvm.x86.sse2.mfence()
// EPOCH-NEXT: store atomic i64 1
// SCP-LABEL: define {{.*}}publish
// SCP: store i64
// SCP-NEXT: call void @llvm.x86.clwb
// SCP-NEXT: call void @llvm.x86.sse.sfence()
// SCP-NOT: mfence
// TRACED-LABEL: define {{.*}}publish
// TRACED: call void @llvm.x86.sse.sfence()
// TRACED-NEXT: call void @__pmkit_arp_release
extern "C" void publish(Rec *r, long v) {
  pmkit_pool *p = nullptr;
  pmkit_pool_create("/nonexistent", 1 << 20, nullptr, &p);
  pmkit_zalloc(p, sizeof(Rec), (void **)&r); // PMAlias: r points to PM
  r->data = v;
  r->ready.store(1, std::memory_order_release);
}

// ARP-LABEL: define {{.*}}handoff
// ARP-NOT: fence
// ARP-NOT: __pmkit_arp
// ARP-LABEL: ret
// EPOCH-LABEL: define {{.*}}handoff
// EPOCH: mfence
// EPOCH: mfence
extern "C" long handoff(pmkit::atomic<long> *q, long v) {
  q->store(v, std::memory_order_release, pmkit::volatile_sync);
  return q->load(std::memory_order_acquire);
}
