// SPDX-License-Identifier: Apache-2.0
// pmkit-robust on C++: exceptions (invoke and landing pads, so a call ends
// its block), virtual calls through vtables, templates, lambdas,
// std::atomic members, operator new and placement new into PM, and a
// destructor run during unwinding. Each setting must finish and leave IR
// that verifies; the store in a try block and the one in its handler are
// both written back, and a write pending when an exception leaves an
// exported function is fenced first, as at a return.
//
// RUN: %clang_pm -x c++ -std=c++17 -O2 -g -S -emit-llvm %s -o %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify -disable-output %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify \
// RUN:   -pmkit-robust-setting=flit -disable-output %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify \
// RUN:   -pmkit-robust-setting=opt -S %t.ll | grep -v llvm.dbg.value \
// RUN:   | %FileCheck %s
// RUN: %clang_pm -x c++ -std=c++17 -O1 -mllvm -pmkit-mode=robust -mllvm \
// RUN:   -pmkit-robust-setting=opt -c %s -o %t.o

#include <atomic>
#include <new>
#include <pmkit/pmkit.h>
#include <stdexcept>

pmkit_pool *pool;

struct Shape {
  long tag = 0;
  virtual ~Shape() = default;
  virtual void set(long v) = 0;
};

struct Box : Shape {
  std::atomic<long> hits{0};
  long w = 0;
  void set(long v) override {
    w = v;
    hits.fetch_add(1, std::memory_order_release);
  }
};

template <class T> T *make() {
  void *p = nullptr;
  if (pmkit_alloc(pool, sizeof(T), &p))
    throw std::bad_alloc();
  return new (p) T();
}

struct Guard {
  long *slot;
  ~Guard() { *slot = -1; }
};

__attribute__((noinline)) long may_throw(long v) {
  if (v < 0)
    throw std::runtime_error("negative");
  return v * 2;
}

// CHECK-LABEL: define {{.*}} @_Z6updateP5Shapel(
// CHECK: invoke {{.*}} @_Z9may_throwl
// CHECK: store i64 %{{.*}}, ptr
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK: landingpad
// CHECK: store i64 -2
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: invoke void @__cxa_rethrow()
void update(Shape *s, long v) {
  try {
    s->tag = may_throw(v);
  } catch (const std::exception &) {
    s->tag = -2;
    throw;
  }
}

// The destructor's store on the unwinding path is fenced before the
// exception leaves the function, as a return would be.
// CHECK-LABEL: define {{.*}} @_Z7guardedPll(
// CHECK: landingpad
// CHECK-NEXT: cleanup
// CHECK-NEXT: store i64 -1
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: resume
void guarded(long *slot, long v) {
  Guard g{slot};
  may_throw(v);
}

Shape *publish(Shape **root, long v) {
  Box *b = make<Box>();
  auto fill = [&](long x) { b->set(x); };
  fill(v);
  *root = b;
  return b;
}

void apply(Shape **root, long v) { (*root)->set(v); }
