// SPDX-License-Identifier: Apache-2.0
// Bad input gets a diagnostic naming the source line, never a crash.
//
// A FASE calling an external function with unknown side effects is an
// error; allowing it (it writes no PM) makes the build succeed.
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -DEXTERNAL -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=EXT
// EXT: diag.c:[[#EXT_LINE:]]:{{[0-9]+}}: error: pmkit-clobber: FASE with_external calls external function 'send_packet' with unknown side effects
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -DEXTERNAL \
// RUN:   -mllvm -pmkit-clobber-allow=send_packet -c %s -o /dev/null
//
// Releasing a lock the FASE did not take breaks strict two-phase locking.
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -DLOCKS -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=LOCK
// LOCK: diag.c:[[#LOCK_LINE:]]:{{[0-9]+}}: warning: pmkit-clobber: FASE early_release releases a lock it did not take
// LOCK-NOT: warning: {{.*}} FASE two_phase
// A lock taken and released inside the FASE with PM work after it
// (hand-over-hand reader locks down a list) breaks it too; a release at the
// very end (two_phase) does not.
// LOCK: diag.c:{{[0-9]+}}:{{[0-9]+}}: warning: pmkit-clobber: FASE walk releases a lock it took before its end, then accesses memory that may be PM ({{.*}}diag.c:{{[0-9]+}})
// LOCK-NOT: warning: {{.*}} FASE two_phase
// C++ names are demangled, and file:line needs no -g (pmkit cc adds line
// tables; here, -gline-tables-only as it does).
// RUN: %clang_pm -x c++ -O2 -gline-tables-only -mllvm -pmkit-mode=clobber \
// RUN:   -DLOCKS -c %s -o /dev/null 2>&1 | %FileCheck %s --check-prefix=LOCKXX
// LOCKXX: diag.c:{{[0-9]+}}:{{[0-9]+}}: warning: pmkit-clobber: FASE early_release(acct*) releases a lock it did not take
//
// Malformed buffer declarations and parameters that cannot be logged.
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -DBADBUF -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=BUF
// BUF: error: pmkit-clobber: FASE bad_buf: PMKIT_FASE_IN/SCRATCH(in:1:3) must name a pointer parameter and an integer parameter
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -DWIDE -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=WIDE
// WIDE: error: pmkit-clobber: FASE wide: parameter 2 of type <4 x float> cannot be logged
//
// A buffer length the FASE never reads is still what its caller passed:
// clobber mode anchors the parameters before the optimizer runs ...
// RUN: %clang_pm -O2 -mllvm -pmkit-mode=clobber -DUNUSED -S -emit-llvm %s \
// RUN:   -o - | %FileCheck %s --check-prefix=KEEP
// KEEP-LABEL: define {{.*}} @caller(
// KEEP-NOT: poison
// KEEP: call void @fill(ptr {{.*}}, ptr {{.*}}, i64 noundef 64)
// KEEP-LABEL: define internal void @fill(
// KEEP: call void @__pmkit_clobber_arg_buf(ptr %1, i64 %2, i32 1)
// KEEP-NOT: __pmkit_fase_keep
// ... and a file optimised without the anchors is refused, not miscompiled.
// RUN: %clang_pm -O2 -g -DUNUSED -c -emit-llvm %s -o %t.bc
// RUN: %not %opt -passes=pmkit-clobber -disable-output %t.bc 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=LOST
// LOST: error: {{.*}}diag.c:[[#@LINE+64]]:{{[0-9]+}}: in function caller {{.*}}pmkit-clobber: argument 3 of FASE fill was optimised away
#include <pmkit/pmkit.h>
#include <pthread.h>

struct acct {
  long bal;
};

#ifdef EXTERNAL
int send_packet(const void *p, unsigned long n);
PMKIT_FASE void with_external(struct acct *a) {
  a->bal += 1;
  send_packet(a, sizeof *a);
}
#endif

#ifdef LOCKS
pthread_mutex_t outer, inner;
PMKIT_FASE void early_release(struct acct *a) {
  a->bal += 1;
  pthread_mutex_unlock(&outer);
}
PMKIT_FASE void two_phase(struct acct *a) {
  pthread_mutex_lock(&inner);
  a->bal += 1;
  pthread_mutex_unlock(&inner);
}
struct lnode {
  pthread_rwlock_t lk;
  long key;
  struct lnode *next;
};
PMKIT_FASE void walk(struct lnode *n, long k, struct acct *a) {
  while (n) {
    pthread_rwlock_rdlock(&n->lk);
    struct lnode *next = n->next;
    if (n->key == k)
      a->bal += 1;
    pthread_rwlock_unlock(&n->lk);
    n = next;
  }
}
#endif

#ifdef BADBUF
PMKIT_FASE PMKIT_FASE_IN(1, 3) void bad_buf(long n, struct acct *a, long m) {
  a->bal = n + m;
}
#endif

#ifdef WIDE
typedef float v4sf __attribute__((vector_size(16)));
PMKIT_FASE void wide(struct acct *a, v4sf v) { a->bal = (long)v[0]; }
#endif

#ifdef UNUSED
PMKIT_FASE PMKIT_FASE_SCRATCH(2, 3) static void fill(struct acct *a, char *buf,
                                                     unsigned long n) {
  (void)n;
  buf[0] = 1;
  a->bal = buf[0];
}
void caller(struct acct *a) {
  char buf[64];
  fill(a, buf, sizeof buf);
}
#endif
