// SPDX-License-Identifier: Apache-2.0
// pmkit_zalloc(pool, n, &r->head) stores the new block's pointer into the
// pool with a plain store. In a FASE that read r->head first, that store
// clobbers an input: clobber mode must log it (re-execution after a crash
// would otherwise read the new pointer as the old head) and write it back;
// robust mode (base setting) must write it back and fence. Both once left
// it alone, and the explorer found inconsistent images.
//
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -mllvm -pmkit-clobber-report \
// RUN:   -c %s -o /dev/null 2>&1 | %FileCheck %s --check-prefix=CLOBBER
// CLOBBER-LABEL: pmkit-clobber: push
// CLOBBER: outparam.c:[[#@LINE+18]]: call: logged: clobbers an input read
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-robust-report \
// RUN:   -c %s -o /dev/null 2>&1 | %FileCheck %s --check-prefix=ROBUST
// ROBUST: outparam.c:[[#@LINE+15]]: pointer stored by the allocator ({{.*}}): write-back + sfence

#include <pmkit/annotations.h>
#include <pmkit/pmkit.h>

struct node {
  long v;
  struct node *next;
};
struct root {
  struct node *head;
};

PMKIT_FASE void push(pmkit_pool *pool, struct root *r, long v) {
  struct node *old = r->head;
  pmkit_zalloc(pool, sizeof(struct node), (void **)&r->head);
  r->head->v = v;
  r->head->next = old;
}
