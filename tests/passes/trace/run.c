// SPDX-License-Identifier: Apache-2.0
// Execution test of pmkit-trace with libpmkit-trace: a traced program's
// trace holds its pool, its own stores with their source lines, the
// runtime's allocator writes, flushes, fences and marks in program order.
// The same program built without the pass records no user stores (the
// must-fail half), and without PMKIT_TRACE nothing is written at all.
//
// RUN: rm -f %t.pool %t.trace
// RUN: %clang_pm -O1 -g -mllvm -pmkit-trace %s %link_trace -o %t.exe
// RUN: env PMKIT_TRACE=%t.trace PMKIT_DOMAIN=adr %t.exe %t.pool
// RUN: %explore --dump --trace %t.trace | %FileCheck %s
// RUN: rm -f %t.pool %t.trace
// RUN: %clang_nopm -O1 -g %s %link_trace -o %t.nopm.exe
// RUN: env PMKIT_TRACE=%t.trace PMKIT_DOMAIN=adr %t.nopm.exe %t.pool
// RUN: %explore --dump --trace %t.trace | %not %FileCheck %s
// RUN: rm -f %t.pool %t.trace
// RUN: %t.exe %t.pool
// RUN: test ! -e %t.trace
//
// CHECK: pool 0 {{.*}}.pool base
// CHECK: t0 pool-open pool0+0
// CHECK: t0 rmw pool0+{{[0-9]+}} len=8 {{.*}}runtime/core/heap.c
// CHECK: t0 mark-begin - op
// CHECK: t0 store pool0+{{[0-9]+}} len=8 val=42 {{.*}}run.c:[[@LINE+22]]
// CHECK-NEXT: t0 flush pool0+{{[0-9]+}} kind={{[123]}} {{.*}}flush.c
// CHECK-NEXT: t0 fence - kind=1
// CHECK-NEXT: t0 store pool0+{{[0-9]+}} len=8 val=1 {{.*}}run.c:[[@LINE+21]]
// CHECK: t0 mark-end - op
// CHECK: t0 pool-close pool0+0
#include <pmkit/pmkit.h>
#include <stdio.h>

struct root {
  uint64_t *data;
  uint64_t ready;
};

int main(int argc, char **argv) {
  pmkit_pool *p;
  struct root *r;
  uint64_t *d;
  if (pmkit_pool_create(argv[1], 2 << 20, NULL, &p) ||
      pmkit_root(p, sizeof *r, (void **)&r) || pmkit_alloc(p, 8, (void **)&d))
    return printf("%s\n", pmkit_errormsg()), 1;
  pmkit_mark_begin("op");
  *d = 42;
  pmkit_persist(d, 8);
  r->ready = 1;
  pmkit_persist(&r->ready, 8);
  pmkit_mark_end("op");
  return pmkit_pool_close(p);
}
