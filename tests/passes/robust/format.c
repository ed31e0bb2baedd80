// SPDX-License-Identifier: Apache-2.0
// printf's %n stores an int through an argument: robust mode writes back
// what a program stores, not what printf stores for it, so it warns where a
// format's %n target (any argument after a format that is not a constant)
// may point to PM -- and says nothing where the format is a constant
// without %n, or where the %n target is a stack slot while other arguments
// are PM. _FORTIFY_SOURCE's checked forms (__printf_chk, ...) likewise.
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=robust -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --implicit-check-not=warning:
// RUN: %clang_pm -O2 -g -D_FORTIFY_SOURCE=2 -mllvm -pmkit-mode=robust -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=FORTIFY
// CHECK: format.c:[[#@LINE+25]]:{{[0-9]+}}: warning: pmkit-robust: printf's format may store through an argument that may be PM
// CHECK: format.c:[[#@LINE+30]]:{{[0-9]+}}: warning: pmkit-robust: snprintf's format may store through an argument that may be PM
// CHECK: format.c:[[#@LINE+35]]:{{[0-9]+}}: warning: pmkit-robust: fprintf's format may store through an argument that may be PM
// CHECK: format.c:[[#@LINE+40]]:{{[0-9]+}}: warning: pmkit-robust: printf's format may store through an argument that may be PM
// CHECK: format.c:[[#@LINE+44]]:{{[0-9]+}}: warning: pmkit-robust: dprintf's format may store through an argument that may be PM
// FORTIFY: format.c:[[#@LINE+20]]:{{[0-9]+}}: warning: pmkit-robust: __printf_chk's format may store through an argument that may be PM
// FORTIFY: format.c:[[#@LINE+42]]:{{[0-9]+}}: warning: pmkit-robust: __dprintf_chk's format may store through an argument that may be PM

#include <pmkit/pmkit.h>
#include <stdio.h>

struct root {
  int count;
  short half;
  char name[16];
};

struct root *pm_root(pmkit_pool *p) {
  void *r = NULL;
  pmkit_root(p, sizeof(struct root), &r);
  return r;
}

void counted(pmkit_pool *p) {
  struct root *r = pm_root(p);
  printf("%s%n\n", r->name, &r->count);
}

int buffered(pmkit_pool *p) {
  struct root *r = pm_root(p);
  char buf[8];
  snprintf(buf, sizeof buf, "%-4d%*d%hn", 7, 2, 3, &r->half);
  return buf[0];
}

void unknown_format(pmkit_pool *p, const char *fmt) {
  struct root *r = pm_root(p);
  fprintf(stderr, fmt, &r->count);
}

void positional(pmkit_pool *p) {
  struct root *r = pm_root(p);
  int n = 0;
  printf("%2$s%1$n%3$n", &n, r->name, &r->count);
}

void to_fd(pmkit_pool *p) {
  struct root *r = pm_root(p);
  dprintf(1, "abc%n\n", &r->count);
}

// Reads PM through %s and %d, stores nothing: no warning.
void plain(pmkit_pool *p) {
  struct root *r = pm_root(p);
  printf("%s %d %%n\n", r->name, r->count);
}

// %n into a stack slot, %s from PM: no warning.
int local(pmkit_pool *p) {
  struct root *r = pm_root(p);
  int n = 0;
  printf("%s%n", r->name, &n);
  return n;
}
