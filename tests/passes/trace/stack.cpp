// SPDX-License-Identifier: Apache-2.0
// Call stacks of trace events: every call that may reach traced code is
// bracketed by __pmkit_trace_enter(call site) and __pmkit_trace_leave; C
// library calls, intrinsics and the C++ runtime's are not. A function with
// invokes takes its depth on entry and leaves to it in each landing pad,
// so frames an exception unwound do not stay on the stack. Executed: the
// store after a caught exception records its call stack, and nothing of
// the unwound frames (the must-fail half: a build whose landing pads do not
// reset the depth would put deep's and thrower's call sites under it).
//
// RUN: %clang_pm -x c++ -O1 -g -fno-discard-value-names -mllvm -pmkit-trace \
// RUN:   -S -emit-llvm %s -o %t.ll
// RUN: %FileCheck %s < %t.ll
// RUN: rm -f %t.pool %t.trace
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-trace %s %link_trace -lstdc++ \
// RUN:   -o %t.exe
// RUN: env PMKIT_TRACE=%t.trace PMKIT_DOMAIN=adr %t.exe %t.pool
// RUN: %explore --dump --trace %t.trace | %FileCheck %s --check-prefix=EXEC
#include <pmkit/pmkit.h>
#include <stdexcept>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) void thrower(int x) {
  if (x)
    throw std::runtime_error("x");
}
__attribute__((noinline)) void deep(int n, int x) {
  if (n)
    deep(n - 1, x);
  else
    thrower(x);
}

// CHECK-LABEL: define{{.*}} void @_Z5storePm(
// CHECK: call i32 @__pmkit_trace_enter(
// CHECK-NEXT: call void @_Z4deepii(i32 noundef 3, i32 noundef 0)
// CHECK-NEXT: call void @__pmkit_trace_leave(
// CHECK-NOT: __pmkit_trace_enter
// CHECK: ret void
__attribute__((noinline)) void store(uint64_t *p) {
  deep(3, 0);
  *p = 42;
  memset(p + 1, 0, 8);
  printf("%d\n", (int)p[0]);
}

// CHECK-LABEL: define{{.*}} void @_Z7publishPm(
// CHECK: %[[D:.*]] = call i32 @__pmkit_trace_depth()
// CHECK: call i32 @__pmkit_trace_enter(
// CHECK-NEXT: invoke void @_Z4deepii(
// CHECK: landingpad
// CHECK-NEXT: catch
// CHECK-NEXT: call void @__pmkit_trace_leave(i32 %[[D]])
// CHECK-NOT: __pmkit_trace_enter{{.*}}\n{{.*}}@__cxa_begin_catch
// CHECK: ret void
__attribute__((noinline)) void publish(uint64_t *p) {
  try {
    deep(5, 1);
  } catch (const std::exception &) {
  }
  store(p); // CALL
}

// EXEC: {{^}}[[#]] t0 store pool0+{{[0-9]+}} len=8 val=42 {{.*}}stack.cpp:[[#@LINE-22]]:6 <- {{.*}}stack.cpp:[[#@LINE-3]]:3 <- {{.*}}stack.cpp:[[#@LINE+7]]:3{{$}}
int main(int argc, char **argv) {
  pmkit_pool *p;
  uint64_t *d;
  if (pmkit_pool_create(argv[1], 2 << 20, NULL, &p) ||
      pmkit_alloc(p, 16, (void **)&d))
    return printf("%s\n", pmkit_errormsg()), 1;
  publish(d);
  return pmkit_pool_close(p);
}
