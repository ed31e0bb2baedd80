// SPDX-License-Identifier: Apache-2.0
// Every mode of -pmkit-mode compiles; an unknown one fails the compile
// with LLVM's one-line option error.
//
// RUN: %clang_pm -mllvm -pmkit-mode=none -c %s -o %t.o
// RUN: %clang_pm -mllvm -pmkit-mode=robust -c %s -o %t.o
// RUN: %clang_pm -mllvm -pmkit-mode=clobber -c %s -o %t.o
// RUN: %clang_pm -mllvm -pmkit-mode=ssapp -c %s -o %t.o
// RUN: %clang_pm -mllvm -pmkit-mode=arp -c %s -o %t.o
// RUN: %not %clang_pm -mllvm -pmkit-mode=bogus -c %s -o %t.o 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=BOGUS
// BOGUS: Cannot find option named 'bogus'

#include <pmkit/annotations.h>

PMKIT_FASE int add(int a, int b) { return a + b; }
