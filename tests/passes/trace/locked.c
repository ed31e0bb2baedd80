// SPDX-License-Identifier: Apache-2.0
// Every locked instruction is a fence, whatever memory it touches: a
// seq_cst store (xchg), an RMW or a compare-exchange on a global is
// reported after it to __pmkit_trace_atomic_end with token -1 (not in a
// pool), which records a fence (PMKIT_FENCE_LOCKED) when the thread has
// flushes to order, as for DRAM the pass could not rule out. A release
// store (a plain mov) is none, nor is `atomicrmw or 0` with its result
// unused and not seq_cst, for which the backend emits nothing. Executed: a
// clwb of a pool word, a seq_cst store to a DRAM global, then the commit
// store: the trace holds the fence between them, so the explorer knows the
// clwb completed.
//
// RUN: %clang_pm -O1 -fno-discard-value-names -mllvm -pmkit-trace \
// RUN:   -S -emit-llvm %s -o %t.ll
// RUN: %FileCheck %s < %t.ll
// RUN: rm -f %t.pool %t.trace
// RUN: %clang_pm -O1 -g -mllvm -pmkit-trace %s %link_trace -o %t.exe
// RUN: env PMKIT_TRACE=%t.trace PMKIT_DOMAIN=adr %t.exe %t.pool
// RUN: %explore --dump --trace %t.trace | %FileCheck %s --check-prefix=TRACE
// RUN: rm -f %t.pool
// RUN: %explore --no-progress --check '%t.exe check {pool}' -- %t.exe %t.pool \
// RUN:   | %FileCheck %s --check-prefix=OK --implicit-check-not=FAIL
#include <pmkit/pmkit.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

_Atomic uint64_t dram;

// CHECK-LABEL: define{{.*}} void @xchg_global(
// CHECK: store atomic i64 1, ptr @dram seq_cst
// CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 -1, ptr @dram, i64 0, i32 0, i32 3,
void xchg_global(void) { atomic_store(&dram, 1); }

// CHECK-LABEL: define{{.*}} void @rmw_global(
// CHECK-NOT: __pmkit_trace_atomic_begin
// CHECK: atomicrmw add ptr @dram
// CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 -1, ptr @dram, {{.*}}, i32 3,
// CHECK: cmpxchg ptr @dram
// CHECK-NEXT: call void @__pmkit_trace_atomic_end(i32 -1, ptr @dram, {{.*}}, i32 3,
void rmw_global(void) {
  atomic_fetch_add(&dram, 1);
  uint64_t e = 0;
  atomic_compare_exchange_strong(&dram, &e, 2);
}

// CHECK-LABEL: define{{.*}} void @not_locked(
// CHECK-NOT: __pmkit_trace
// CHECK: ret void
void not_locked(void) {
  atomic_store_explicit(&dram, 3, memory_order_release);
  atomic_fetch_or_explicit(&dram, 0, memory_order_relaxed);
}

// With no flush pending a locked instruction orders nothing: no FENCE, no
// crash point (a thread spinning on a DRAM lock would otherwise flood the
// trace with them).
void spin(void) {
  for (int i = 0; i < 4; i++)
    // TRACE-NOT: locked.c:[[@LINE+1]]
    atomic_fetch_add(&dram, 1);
}

struct root {
  uint64_t data;
  uint64_t pad[7]; // data alone on its line
  uint64_t ready;
};

// TRACE: t0 store pool0+{{[0-9]+}} len=8 val=42 {{.*}}locked.c:[[@LINE+16]]
// TRACE-NEXT: t0 flush pool0+{{[0-9]+}} kind={{[23]}}
// TRACE-NEXT: t0 fence - kind=3 {{.*}}locked.c:
// TRACE-NEXT: t0 store pool0+{{[0-9]+}} len=8 val=1 {{.*}}locked.c:[[@LINE+16]]
// OK: result: {{ok|no failure}}
int main(int argc, char **argv) {
  pmkit_pool *p;
  struct root *r;
  int check = argc == 3 && !strcmp(argv[1], "check");
  const char *path = argv[argc - 1];
  if ((check ? pmkit_pool_open(path, NULL, &p)
             : pmkit_pool_create(path, 2 << 20, NULL, &p)) ||
      pmkit_root(p, sizeof *r, (void **)&r))
    return printf("%s\n", pmkit_errormsg()), 2;
  if (!check) {
    spin();
    r->data = 42;
    pmkit_flush(&r->data, 8); /* clwb or clflushopt: completes at a fence */
    xchg_global();            /* the fence: a locked instruction on DRAM */
    r->ready = 1;
    pmkit_persist(&r->ready, 8);
  }
  int bad = r->ready && r->data != 42;
  pmkit_pool_close(p);
  return bad;
}
