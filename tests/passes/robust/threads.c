// SPDX-License-Identifier: Apache-2.0
// --robustness on two threads: strict persistency orders writes by
// happens-before, not by the order a trace happened to record them in.
// Thread A stores x and writes it back; before A's fence, thread B stores y,
// writes it back and fences. A crash then can keep y and lose x.
//
// - apart: B never reads x (it reads another word of the pool, so that the
//   trace has loads to find happens-before with). The two writes are
//   unsynchronised (the handshake is a DRAM flag, which the trace does not
//   record), so strict persistency may persist y first: no violation, and
//   the report counts the image as unordered.
// - reads: B reads x (a traced PM load) before it stores y, so x happens
//   before y: keeping y and losing x is a violation (the must-fail half).
//   Before the explorer ordered threads by happens-before, both were
//   violations, and robust mode could not be checked on concurrent code.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -O1 -g -pthread -mllvm -pmkit-trace -mllvm -pmkit-trace-loads \
// RUN:   %s %link_trace -o %t
// RUN: %explore --model x86-line --robustness --no-progress --save-dir %t.d/a \
// RUN:   --check '%t check {pool}' -- %t apart %t.d/a.pool \
// RUN:   | %FileCheck %s --check-prefix=APART
// APART: robustness: 0 of {{[0-9]+}} crash images {{.*}}threads ordered by happens-before
// APART-NEXT: {{[1-9][0-9]*}} more keep a write of one thread while losing an earlier write of another
// APART: result: ok (exhaustive): every crash image
// RUN: %not %explore --model x86-line --robustness --no-progress --save-dir %t.d/r \
// RUN:   --check '%t check {pool}' -- %t reads %t.d/r.pool \
// RUN:   | %FileCheck %s --check-prefix=READS
// READS: robustness: {{[1-9][0-9]*}} of {{[0-9]+}} crash images
// READS: the store at {{.*}}threads.c:50:8 (thread {{[0-9]+}}) can be lost while the later store at {{.*}}threads.c:64:8 root.y (thread {{[0-9]+}}) persisted: it needs a fence before the other thread's store
// READS: result: FAILED

#include <pmkit/pmkit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

struct root {
  unsigned long x, pad1[7];
  unsigned long y, pad2[7];
};

static struct root *r;
static atomic_int stage; // DRAM: 1 after A stored x, 2 after B fenced y
static int reads;

static void *thread_a(void *arg) {
  (void)arg;
  r->x = 1;
  pmkit_flush(&r->x, sizeof r->x);
  atomic_store_explicit(&stage, 1, memory_order_release); // no fence
  while (atomic_load_explicit(&stage, memory_order_acquire) != 2)
    ;
  pmkit_fence();
  return NULL;
}

static void *thread_b(void *arg) {
  (void)arg;
  while (atomic_load_explicit(&stage, memory_order_acquire) != 1)
    ;
  unsigned long seen = reads ? r->x : r->pad2[1] + 1; // a PM load either way
  r->y = seen + 1;
  pmkit_persist(&r->y, sizeof r->y);
  atomic_store_explicit(&stage, 2, memory_order_release);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  pmkit_pool *p;
  int check = !strcmp(argv[1], "check");
  int err = check ? pmkit_pool_open(argv[2], NULL, &p)
                  : pmkit_pool_create(argv[2], 8 << 20, NULL, &p);
  if (err || pmkit_root(p, sizeof *r, (void **)&r))
    return 2;
  if (check) {
    if (r->y && !r->x) {
      printf("y without x\n");
      return 0; // the checker accepts it: robustness alone must judge
    }
    return 0;
  }
  reads = !strcmp(argv[1], "reads");
  pthread_t a, b;
  pthread_create(&a, NULL, thread_a, NULL);
  pthread_create(&b, NULL, thread_b, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  pmkit_pool_close(p);
  return 0;
}
