// SPDX-License-Identifier: Apache-2.0
// pmkit-pmalias: strtol stores a pointer into the string through its end
// pointer, so a store through that end pointer may write PM (the string is
// in the pool). The call-effects table once said strtol moves no pointer:
// the store was called DRAM, and robust mode left it unwritten-back.
//
// RUN: %clang_pm -O1 -g -S -emit-llvm %s -o %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-pmalias -disable-output %t.ll \
// RUN:   | %FileCheck %s
// CHECK: cut: PM {{.*}}store i8 0

#include <pmkit/pmkit.h>
#include <stdlib.h>

pmkit_pool *pool;

struct root {
  char text[16];
};

void cut(void) {
  struct root *r = pmkit_pool_base(pool);
  char *end;
  strtol(r->text, &end, 10);
  *end = 0;
}
