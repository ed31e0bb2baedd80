// SPDX-License-Identifier: Apache-2.0
// -pmkit-annotations-report lists every (function, kind) pair, sorted by
// function name, whatever the source order and optimisation level; other
// tools' annotations and unannotated functions are not listed.
//
// RUN: %clang_pm -O0 -c %s -o /dev/null -mllvm -pmkit-annotations-report 2>&1 \
// RUN:   | %FileCheck %s --implicit-check-not=pmkit-annotations
// RUN: %clang_pm -O2 -c %s -o /dev/null -mllvm -pmkit-annotations-report 2>&1 \
// RUN:   | %FileCheck %s --implicit-check-not=pmkit-annotations
// Without the option the pass is silent:
// RUN: %clang_pm -O2 -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=QUIET --allow-empty
// QUIET-NOT: {{.}}

// CHECK: pmkit-annotations: alpha_alloc pm_allocator
// CHECK-NEXT: pmkit-annotations: beta_both fase
// CHECK-NEXT: pmkit-annotations: beta_both robust_ignore
// CHECK-NEXT: pmkit-annotations: mid_ignore robust_ignore
// CHECK-NEXT: pmkit-annotations: zeta_fase fase

#include <pmkit/annotations.h>
#include <stdlib.h>

PMKIT_FASE void zeta_fase(int *p) { *p += 1; }

PMKIT_PM_ALLOCATOR void *alpha_alloc(size_t n) { return malloc(n); }

PMKIT_ROBUST_IGNORE void mid_ignore(int *p) { *p = 0; }

PMKIT_ROBUST_IGNORE PMKIT_FASE void beta_both(int *p) { *p *= 2; }

__attribute__((annotate("other.tool"))) void gamma_other(int *p) { *p = 3; }

void plain(int *p) { *p = 4; }
