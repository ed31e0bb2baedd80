// SPDX-License-Identifier: Apache-2.0
// --strip-existing never removes a write-back without the pass placing its
// own. The program writes back a PM store (removed: the pass writes it back)
// and a store to memory the analysis finds no PM in (here calloc memory,
// which the program writes back all the same): that write-back stays, and
// so does the function's fence, and the report says why. (Without the rule
// both calls go, and the dram_store checks fail.)
//
// RUN: %clang_pm -O1 -g -S -emit-llvm %s -o %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -S %t.ll \
// RUN:   -pmkit-robust-strip-existing -pmkit-robust-report 2>%t.report \
// RUN:   | %FileCheck %s
// RUN: %FileCheck %s --check-prefix=REPORT < %t.report
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -S %t.ll \
// RUN:   -pmkit-robust-strip-existing -pmkit-robust-setting=opt | %FileCheck %s
#include <pmkit/pmkit.h>
#include <stdlib.h>

// CHECK-LABEL: define {{.*}}@pm_store(
// CHECK-NOT: call void @pmkit_persist
// CHECK-NOT: call void @pmkit_fence
// CHECK: ret
void pm_store(pmkit_pool *p) {
  long *r;
  if (pmkit_root(p, sizeof *r, (void **)&r))
    return;
  *r = 1;
  pmkit_persist(r, sizeof *r);
}

// CHECK-LABEL: define {{.*}}@dram_store(
// CHECK: call void @pmkit_flush(
// CHECK: call void @pmkit_fence(
// REPORT: strip_keeps.c:[[#@LINE+5]]: kept the program's write-back: the analysis finds no PM at its address, so it places none
long *dram_store(void) {
  long *d = calloc(1, sizeof *d);
  if (d) {
    *d = 2;
    pmkit_flush(d, sizeof *d);
    pmkit_fence();
  }
  return d;
}
