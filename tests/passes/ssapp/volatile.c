// SPDX-License-Identifier: Apache-2.0
// Volatile memory a resumed FASE would lose is a compile-time error in
// ssapp mode: a write to a thread-local or static variable (recovery
// resumes after it, and the crash lost it), and clobber mode's
// PMKIT_FASE_IN buffers (ssapp keeps no copy). A local of the FASE and
// the pool are fine (the must-pass half).
//
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DTLS -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=TLS
// TLS: volatile.c:[[#@LINE+23]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_tls writes the thread-local variable nodes, which is volatile memory
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DSTATIC -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=STATIC
// STATIC: volatile.c:[[#@LINE+28]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_static writes the static variable hits, which is volatile memory
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DIN -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=IN
// IN: volatile.c:{{[0-9]+}}:{{[0-9]+}}: error: pmkit-ssapp: FASE with_in declares PMKIT_FASE_IN or PMKIT_FASE_SCRATCH buffers, which only clobber mode copies
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -DIN -c %s -o /dev/null
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --allow-empty --check-prefix=FINE
// FINE-NOT: error
#include <pmkit/annotations.h>
#include <pmkit/pmkit.h>
#include <string.h>

struct node {
  long v;
  struct node *next;
};

#ifdef TLS
__thread struct node *nodes[1024];
PMKIT_FASE void with_tls(struct node *n, long i) {
  nodes[i & 1023] = n;
  n->v = i;
}
#endif
#ifdef STATIC
static long hits;
PMKIT_FASE void with_static(struct node *n, long i) {
  n->v = i;
  hits++;
}
long read_hits(void) { return hits; }
#endif
#ifdef IN
PMKIT_FASE PMKIT_FASE_IN(2, 3) void with_in(struct node *n, const char *key,
                                            long len) {
  memcpy(&n->v, key, len < 8 ? len : 8);
}
#endif
PMKIT_FASE void fine(struct node *n, long i) {
  long local[4] = {i, i + 1, i + 2, i + 3};
  n->v = local[i & 3];
}
