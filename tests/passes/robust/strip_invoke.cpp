// SPDX-License-Identifier: Apache-2.0
// --strip-existing on C++: a persistence call the compiler emitted as an
// invoke (libpmem's pmem_persist, declared without nothrow, in a scope with
// a destructor) is removed with a branch to where it returns, in every
// setting, and the pass places its own write-back and fence (it crashed
// clang before). pmkit.h's functions cannot throw: pmkit_persist is a
// plain call, never an invoke.
//
// RUN: %clang_pm -x c++ -O1 -S -emit-llvm %s -o %t.ll
// RUN: %FileCheck %s --check-prefix=IR < %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -S %t.ll \
// RUN:   -pmkit-robust-strip-existing | %FileCheck %s
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -S %t.ll \
// RUN:   -pmkit-robust-strip-existing -pmkit-robust-setting=opt | %FileCheck %s
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -S %t.ll \
// RUN:   -pmkit-robust-strip-existing -pmkit-robust-setting=flit \
// RUN:   | %FileCheck %s
#include <pmkit/pmkit.h>
#include <stddef.h>

extern "C" void pmem_persist(const void *addr, size_t len);

struct D {
  ~D();
};

// IR-LABEL: define {{.*}}@_Z4libpPi(
// IR: invoke void @pmem_persist(
// CHECK-LABEL: define {{.*}}@_Z4libpPi(
// CHECK-NOT: pmem_persist
// CHECK: store i32 1
// CHECK: call void @llvm.x86.clwb
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK-NOT: pmem_persist
// CHECK: ret void
void libp(int *p) {
  D d;
  *p = 1;
  pmem_persist(p, sizeof *p);
}

// IR-LABEL: define {{.*}}@_Z4ownpPi(
// IR-NOT: invoke void @pmkit_persist(
// IR: call void @pmkit_persist(
// CHECK-LABEL: define {{.*}}@_Z4ownpPi(
// CHECK-NOT: pmkit_persist
// CHECK: call void @llvm.x86.clwb
// CHECK: ret void
void ownp(int *p) {
  D d;
  *p = 2;
  pmkit_persist(p, sizeof *p);
}
