// SPDX-License-Identifier: Apache-2.0
// pmkit-pmalias: strtol stores a pointer into the string through its end
// pointer. A store through that end pointer may write PM when the string is
// in the pool (the call-effects table once said strtol moves no pointer:
// the store was called DRAM, and robust mode left it unwritten-back), and
// writes DRAM when the string is a stack buffer (taken for unknown code,
// strtol once made it unknown memory, so PM: the benchmarks' driver parsed
// its options with strtoull, and robust mode then wrote back and fenced
// every store to the operations' DRAM value buffers).
//
// RUN: %clang_pm -O1 -g -S -emit-llvm %s -o %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-pmalias -disable-output %t.ll \
// RUN:   | %FileCheck %s
// CHECK: cut: PM {{.*}}store i8 0{{.*}}; pmkit_pool_base
// The terminator the loop leaves, then the store through the end pointer:
// CHECK: cut_local: DRAM {{.*}}store i8 0
// CHECK-NOT: cut_local: PM
// CHECK: cut_local: DRAM {{.*}}store i8 0

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

void use(char *);

void cut_local(const char *digits) {
  char text[16];
  for (int i = 0; i < 15; i++)
    text[i] = digits[i];
  text[15] = 0;
  char *end;
  strtoull(text, &end, 10);
  *end = 0;
  use(text);
}
