// SPDX-License-Identifier: Apache-2.0
// pmkit-robust, opt and flit settings: the escape and persistency-state
// dataflow. One case per transfer function and violation kind: a fresh
// object's stores wait and the object is written back as it escapes; two
// escaped locations pending at once need a fence between them; atomic
// loads write back and defer the fence to the next store; a release to
// DRAM and a function exit wait for pending write-backs; a locked RMW
// orders them itself; an array element indexed by a changing variable is a
// new location each iteration; a write pending as a loop begins is
// fenced once, before it; a callee that writes PM first makes its
// caller fence, and may return with its own write pending; a callee given
// a captured object gets a clone for that context; memcpy gets a
// range write-back; PMKIT_ROBUST_IGNORE regions get nothing. flit wraps
// atomic writes in counters and checks the counter after atomic loads.
//
// RUN: %clang_pm -O1 -g -S -emit-llvm %s -o %t.ll
// (Debug intrinsics filtered out so that CHECK-NEXT sees the code.)
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -pmkit-robust-setting=opt \
// RUN:   -S %t.ll | grep -v llvm.dbg.value | %FileCheck %s
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -pmkit-robust-setting=opt \
// RUN:   -disable-output -pmkit-robust-report %t.ll 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=REPORT
// RUN: %opt -passes=pmkit-annotations,pmkit-robust \
// RUN:   -pmkit-robust-setting=flit -S %t.ll | grep -v llvm.dbg.value \
// RUN:   | %FileCheck %s --check-prefix=FLIT
// The base setting fences after every store: more sfences than opt.
// RUN: %opt -passes=pmkit-annotations,pmkit-robust -S %t.ll \
// RUN:   | grep -v llvm.dbg.value | %FileCheck %s --check-prefix=BASE

#include <pmkit/annotations.h>
#include <pmkit/pmkit.h>
#include <stdatomic.h>
#include <string.h>

pmkit_pool *pool;
_Atomic int dram_flag;

struct node {
  long key, val;
  struct node *next;
};
struct list {
  struct node *head;
  long count;
  _Atomic long ver;
  long arr[64];
};

struct list *root(void) {
  void *p;
  pmkit_root(pool, sizeof(struct list), &p);
  return p;
}

// CHECK-LABEL: define {{.*}} @push(
// CHECK: call i32 @pmkit_alloc
// CHECK-NOT: sfence
// CHECK-NOT: clwb
// CHECK: store ptr %{{.*}}, ptr %{{.*}}
// The node's 24 bytes: at most two lines, then the fence, then the publish.
// CHECK: [[N:%[0-9]+]] = load ptr, ptr %{{[0-9]+}}
// CHECK-NEXT: getelementptr i8, ptr [[N]], i64 0
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: getelementptr i8, ptr [[N]], i64 23
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: store ptr %{{.*}}, ptr %0
// CHECK-NEXT: call void @llvm.x86.clwb(ptr %0)
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: ret i32
/* A fresh node: its stores wait; it is written back as it escapes. */
int push(struct list *l, long k, long v) {
  void *p;
  if (pmkit_alloc(pool, sizeof(struct node), &p))
    return -1;
  struct node *n = p;
  n->key = k;
  n->val = v;
  n->next = l->head;
  l->head = n;
  return 0;
}

// CHECK-LABEL: define {{.*}} @two_fields(
// CHECK: store i64 1
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: store i64 2
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: ret void
/* Two fields of an escaped object: a fence between them. */
void two_fields(struct list *l) {
  l->count = 1;
  l->arr[0] = 2;
}

// CHECK-LABEL: define {{.*}} @loads(
// CHECK: load atomic i64, ptr [[V:%[0-9]+]] seq_cst
// CHECK-NEXT: call void @llvm.x86.clwb(ptr [[V]])
// CHECK-NEXT: load atomic i64, ptr [[V]] acquire
// CHECK-NEXT: call void @llvm.x86.clwb(ptr [[V]])
// CHECK-NOT: sfence
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: store i64
// FLIT-LABEL: define {{.*}} @loads(
// FLIT: load atomic i64, ptr [[V:%[0-9]+]] seq_cst
// FLIT: [[C:%[0-9]+]] = load atomic i64, ptr %{{[0-9]+}} monotonic
// FLIT-NEXT: [[UP:%[0-9]+]] = icmp ne i64 [[C]], 0
// FLIT-NEXT: br i1 [[UP]]
// FLIT: call void @llvm.x86.clwb(ptr [[V]])
// FLIT-NEXT: call void @llvm.x86.sse.sfence()
// FLIT: load atomic i64, ptr [[V]] acquire
// The store needs no fence: nothing is pending.
// FLIT: add nsw i64
// FLIT-NEXT: getelementptr
// FLIT-NEXT: store i64
/* Atomic loads: a write-back each, one fence before the next store. */
long loads(struct list *l) {
  long a = atomic_load(&l->ver);
  long b = atomic_load_explicit(&l->ver, memory_order_acquire);
  l->count = a + b;
  return a;
}

// CHECK-LABEL: define {{.*}} @release(
// CHECK: store i64 7
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: store atomic i32 1, ptr @dram_flag release
// CHECK-NEXT: ret void
/* A release to DRAM waits for the pending write. */
void release(struct list *l) {
  l->count = 7;
  atomic_store_explicit(&dram_flag, 1, memory_order_release);
}

// CHECK-LABEL: define {{.*}} @rmw(
// CHECK: store i64 3
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NOT: sfence
// CHECK: atomicrmw add ptr
// CHECK-NEXT: call void @llvm.x86.clwb
// FLIT-LABEL: define {{.*}} @rmw(
// FLIT: [[CNT:%[0-9]+]] = getelementptr inbounds [65536 x i64], ptr @__pmkit_flit_counters
// FLIT-NEXT: atomicrmw add ptr [[CNT]], i64 1 seq_cst
// FLIT-NEXT: atomicrmw add ptr [[P:%[0-9]+]], i64 1 seq_cst
// FLIT-NEXT: call void @llvm.x86.clwb(ptr [[P]])
// FLIT-NEXT: atomicrmw sub ptr [[CNT]], i64 1 seq_cst
// FLIT-NEXT: ret void
/* A locked RMW orders the pending write: no sfence for it. */
void rmw(struct list *l) {
  l->count = 3;
  atomic_fetch_add(&l->ver, 1);
}

// CHECK-LABEL: define {{.*}} @fill(
// CHECK: phi i64
// CHECK-NEXT: getelementptr
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: store i64
// CHECK-NEXT: call void @llvm.x86.clwb
/* An array by index: a fence each iteration (the index changes). */
void fill(struct list *l, int n) {
  for (int i = 0; i < n; i++)
    l->arr[i] = i;
}

// CHECK-LABEL: define {{.*}} @loop_entry(
// CHECK: store i64
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: br label
// CHECK: phi i64
// CHECK-NEXT: getelementptr
// CHECK-NEXT: store i64
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: trunc
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: store atomic i32 %{{.*}}, ptr @dram_flag release
/* A write pending as a loop begins is fenced once, on the way in: each
 * iteration ends clean (its release waited), so a fence in the body for
 * the entry path alone would run every iteration. */
void loop_entry(struct list *l, int n) {
  l->count = n;
  for (int i = 0; i < n; i++) {
    l->arr[i] = i;
    atomic_store_explicit(&dram_flag, i, memory_order_release);
  }
}

// CHECK-LABEL: define {{.*}} @calls(
// CHECK: call fastcc void @set_count
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: call fastcc void @set_count
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: ret void
// CHECK-LABEL: define internal fastcc void @set_count(
// CHECK: store i64
// CHECK-NEXT: call void @llvm.x86.clwb
// CHECK-NEXT: ret void
/* A callee that writes PM first: callers fence before calling it; it
 * returns with its write pending. */
__attribute__((noinline)) static void set_count(struct list *l, long c) {
  l->count = c;
}
void calls(struct list *l) {
  set_count(l, 1);
  set_count(l, 2);
}

// CHECK-LABEL: define {{.*}} @copy(
// CHECK: call void @llvm.memcpy
// CHECK-NEXT: call void @__pmkit_flush_range(
// CHECK-NEXT: call void @llvm.x86.sse.sfence()
/* memcpy into PM: a range write-back. */
void copy(struct list *l, const long *src, unsigned long n) {
  memcpy(l->arr, src, n);
}

// A fresh object passed to a function that only fills it: the call goes to
// a clone for that context, whose stores wait too (checked at the end).
// CHECK-LABEL: define {{.*}} @push_init(
// CHECK: call fastcc void @init_node.pmkit.ctx1(
// CHECK-NOT: sfence
// CHECK: call void @llvm.x86.clwb
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK-NEXT: store ptr
__attribute__((noinline)) static void init_node(struct node *n, long k) {
  n->key = k;
  n->val = k;
  n->next = 0;
}
int push_init(struct list *l, long k) {
  void *p;
  if (pmkit_alloc(pool, sizeof(struct node), &p))
    return -1;
  init_node(p, k);
  l->head = p;
  return 0;
}

// CHECK-LABEL: define {{.*}} @ignored(
// CHECK-NOT: clwb
// CHECK-NOT: sfence
// CHECK: ret void
/* Ignored. */
void ignored(struct list *l) {
  PMKIT_ROBUST_IGNORE_BEGIN;
  l->arr[5] = 5;
  PMKIT_ROBUST_IGNORE_END;
}

// CHECK-LABEL: define internal fastcc void @init_node.pmkit.ctx1(
// CHECK-NOT: clwb
// CHECK-NOT: sfence
// CHECK: ret void
// REPORT: opt.c:80: write-back of the object before: the new object from {{.*}}opt.c:74 escapes here: write back its lines
// REPORT: opt.c:80: sfence before: store to PM at {{.*}}opt.c:80, while the write-back after {{.*}}opt.c:80 is not yet fenced
// REPORT: opt.c:95: sfence before: store to PM at {{.*}}opt.c:95, while the write at {{.*}}opt.c:94 is not yet fenced
// REPORT: opt.c:122: sfence before: store to PM at {{.*}}opt.c:122, while the write at {{.*}}opt.c:120 is not yet fenced
// REPORT: opt.c:135: sfence before: release store at {{.*}}opt.c:135, while the write at {{.*}}opt.c:134 is not yet fenced
// REPORT: opt.c:186: sfence before: entering the loop at {{.*}}opt.c:187, while the write at {{.*}}opt.c:185 is not yet fenced
// REPORT: opt.c:209: sfence before: call to set_count at {{.*}}opt.c:209, which writes PM or releases before it fences
// BASE-LABEL: define {{.*}} @push(
// BASE: store i64 %1
// BASE-NEXT: call void @llvm.x86.clwb
// BASE-NEXT: call void @llvm.x86.sse.sfence()
// BASE: store i64 %2
// BASE-NEXT: call void @llvm.x86.clwb
// BASE-NEXT: call void @llvm.x86.sse.sfence()
