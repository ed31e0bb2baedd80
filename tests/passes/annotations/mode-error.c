// SPDX-License-Identifier: Apache-2.0
// Asking for a mode whose passes are not in this build fails the compile
// with one clear error line (no crash dump); the default mode, none, works.
//
// RUN: %not %clang_pm -mllvm -pmkit-mode=arp -c %s -o %t.o 2>&1 \
// RUN:   | %FileCheck %s -DMODE=arp --implicit-check-not={{.}}
// CHECK: error: pmkit: -pmkit-mode=[[MODE]] is not available in this build yet
// CHECK-NEXT: 1 error generated.
//
// opt gives the same line when it builds a pipeline with mode passes:
// RUN: %clang_nopm -S -emit-llvm %s -o %t.ll
// RUN: %not %opt -passes='default<O1>' -pmkit-mode=arp \
// RUN:   -disable-output %t.ll 2>&1 | %FileCheck %s --check-prefix=OPT
// OPT: error: pmkit: -pmkit-mode=arp is not available in this build yet
//
// RUN: %clang_pm -mllvm -pmkit-mode=none -c %s -o %t.o
// RUN: %clang_pm -mllvm -pmkit-mode=robust -c %s -o %t.o
// RUN: %clang_pm -mllvm -pmkit-mode=clobber -c %s -o %t.o
// RUN: %clang_pm -mllvm -pmkit-mode=ssapp -c %s -o %t.o
// RUN: %not %clang_pm -mllvm -pmkit-mode=bogus -c %s -o %t.o 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=BOGUS
// BOGUS: Cannot find option named 'bogus'

#include <pmkit/annotations.h>

PMKIT_FASE int add(int a, int b) { return a + b; }
