// SPDX-License-Identifier: Apache-2.0
// pmkit-robust, opt setting: the cases where a fresh object must not be
// deferred, or a write hides behind a call. An allocation in a loop whose
// previous object is still in hand (a phi) is written back store by store;
// so is one whose slot is cleared after the allocation. pmkit_zalloc's
// write-back of its zeroes is fenced before the object is published. A
// callee handed a captured object that returns it is no allocator (this
// once crashed the pass). A library call writing a string into PM gets a
// warning: robust mode cannot write back what it wrote.
//
// RUN: %clang_pm -O1 -g -S -emit-llvm %s -o %t.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -pmkit-robust-setting=opt \
// RUN:   -disable-output -pmkit-robust-report %t.ll 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=REPORT
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -disable-output %t.ll \
// RUN:   2>&1 | %FileCheck %s --check-prefix=WARN

#include <pmkit/pmkit.h>
#include <string.h>

pmkit_pool *pool;

struct node {
  long key, val;
  struct node *next;
};

struct root {
  struct node *head;
  char name[32];
};

struct root *root_of(void) { return pmkit_pool_base(pool); }

// Each new node links the previous one, then writes it again: the write
// to the previous node comes after the next allocation.
struct node *chain(long n) {
  struct node *prev = 0;
  for (long i = 0; i < n; i++) {
    struct node *x;
    if (pmkit_alloc(pool, sizeof *x, (void **)&x))
      return 0;
    x->key = i;
    x->next = prev;
    if (prev)
      prev->val = i;
    prev = x;
  }
  return prev;
}
// REPORT-DAG: opt-edge.c:[[@LINE-5]]: write-back after: store to PM

void publish_zeroed(void) {
  struct node *x;
  if (pmkit_zalloc(pool, sizeof *x, (void **)&x))
    return;
  root_of()->head = x;
}
// REPORT-DAG: opt-edge.c:[[@LINE-2]]: sfence before: store to PM at {{.*}}, while the write-back after {{.*}}opt-edge.c:[[@LINE-4]] is not yet fenced

void cleared_slot(void) {
  struct node *x = 0;
  if (pmkit_alloc(pool, sizeof *x, (void **)&x))
    return;
  x->key = 7;
  struct node *y = x;
  __asm__ volatile("" : "+r"(y));
  x = 0;
  __asm__ volatile("" ::"r"(&x) : "memory");
  root_of()->head = y;
}
// REPORT-DAG: opt-edge.c:[[@LINE-7]]: write-back after: store to PM

__attribute__((noinline)) struct node *same(struct node *n) { return n; }

void publish_same(void) {
  struct node *x;
  if (pmkit_alloc(pool, sizeof *x, (void **)&x))
    return;
  x->key = 1;
  root_of()->head = same(x);
}
// REPORT-DAG: opt-edge.c:[[@LINE-2]]: write-back of the object before

void name_it(const char *s) { strcpy(root_of()->name, s); }
// WARN: opt-edge.c:[[@LINE-1]]:{{[0-9]+}}: in function name_it {{.*}}pmkit-robust: strcpy may write PM in a way robust mode does not model
