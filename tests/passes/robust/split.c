// SPDX-License-Identifier: Apache-2.0
// A store wider than its alignment can straddle two cache lines, whose
// parts persist independently: robust mode splits it into its aligned parts
// and orders them, so that the later part never persists without the
// earlier. Here an 8-byte copy into a pair of 4-byte words at offsets
// 60..67 of a line-aligned record. Built by robust mode, no crash image
// under x86-line fails the checker (the first word is never older than the
// second) or robustness; built by robust mode without the split, the
// same source fails both, for the torn store (the must-fail half).
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -O1 -g -S -emit-llvm %s -o %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -pmkit-robust-report \
// RUN:   -S %t.ll -o - 2>%t.report | %FileCheck %s
// RUN: %FileCheck %s --check-prefix=REPORT < %t.report
// CHECK-LABEL: define {{.*}}@put(
// CHECK: store i32 {{.*}}, align 4
// CHECK: call void @llvm.x86.clwb
// CHECK: call void @llvm.x86.sse.sfence
// CHECK: store i32 {{.*}}, align 4
// CHECK-NOT: store i64
// CHECK: ret void
// REPORT: split.c:[[@LINE+32]]: split the 8-byte store aligned to 4 into 2 stores
//
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-trace \
// RUN:   -mllvm -pmkit-trace-loads %s %link_trace -o %t.robust
// RUN: %explore --model x86-line --robustness --no-progress \
// RUN:   --save-dir %t.d/robust --check '%t.robust check {pool}' \
// RUN:   -- %t.robust run %t.d/r.pool | %FileCheck %s --check-prefix=ROBUST
// ROBUST: images: {{.*}} 0 failed
// ROBUST: robustness: 0 of {{[0-9]+}} crash images
//
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-robust-no-split \
// RUN:   -mllvm -pmkit-trace -mllvm -pmkit-trace-loads %s %link_trace -o %t.whole
// RUN: %not %explore --stop-after 1 --model x86-line --robustness --no-progress \
// RUN:   --save-dir %t.d/whole --check '%t.whole check {pool}' \
// RUN:   -- %t.whole run %t.d/w.pool | %FileCheck %s --check-prefix=WHOLE
// WHOLE: images: {{.*}} {{[1-9][0-9]*}} failed
// WHOLE: the store of 8 bytes at {{.*}}split.c:[[@LINE+16]]{{.*}} can persist in part
// WHOLE: result: FAILED

#include <pmkit/pmkit.h>
#include <stdint.h>
#include <string.h>

struct rec {
  uint32_t head[15];
  uint32_t pair[2]; // bytes 60..67: across the first line's end
  uint32_t tail[15];
};

// Both words get gen, the first in the first line, the second in the next.
__attribute__((noinline)) void put(struct rec *r, uint32_t gen) {
  uint64_t v = (uint64_t)gen << 32 | gen;
  memcpy(&r->pair[0], &v, sizeof v);
}

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  pmkit_pool *p;
  struct rec *r;
  int create = !strcmp(argv[1], "run");
  int err = create ? pmkit_pool_create(argv[2], 8 << 20, NULL, &p)
                   : pmkit_pool_open(argv[2], NULL, &p);
  if (err || pmkit_root(p, sizeof *r, (void **)&r) || ((uintptr_t)r & 63))
    return 2;
  if (create)
    for (uint32_t gen = 1; gen <= 3; gen++)
      put(r, gen);
  // The first word is written first: it is never older than the second.
  int ok = r->pair[0] >= r->pair[1];
  pmkit_pool_close(p);
  return ok ? 0 : 1;
}
