// SPDX-License-Identifier: Apache-2.0
// Inline asm that writes PM, as atomics libraries without compiler builtins
// spell it (Concurrency Kit's x86_64 port: "movq %1, %0" to an "=m" operand
// for a store, "lock cmpxchgq" for a compare-and-swap). Robust mode writes
// back what the decoded machine code writes through an operand, as for a
// store in IR, and the trace records the write (a locked one as an atomic
// RMW): before both did, such a store was neither written back nor in the
// trace, and the explorer, which never saw it, passed every image. Built in
// each setting the log explores clean under x86-line with --robustness;
// built without the mode it fails both, for the count published by the asm
// store persisting before the entry it counts (the must-fail half).
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-robust-report \
// RUN:   -c %s -o %t.o 2>&1 | %FileCheck %s --check-prefix=REPORT
// REPORT-DAG: asm.c:67: inline asm writing PM (pmkit_root at {{.*}}asm.c:91): write-back + sfence
// REPORT-DAG: asm.c:76: inline asm writing PM (pmkit_root at {{.*}}asm.c:91): write-back + sfence
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-trace \
// RUN:   -mllvm -pmkit-trace-loads %s %link_trace -o %t.base
// RUN: %explore --model x86-line --robustness --no-progress --save-dir %t.d/base \
// RUN:   --check '%t.base check {pool}' -- %t.base run %t.d/b.pool \
// RUN:   | %FileCheck %s --check-prefix=ROBUST
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-robust-setting=opt \
// RUN:   -mllvm -pmkit-trace -mllvm -pmkit-trace-loads %s %link_trace -o %t.opt
// RUN: %explore --model x86-line --robustness --no-progress --save-dir %t.d/opt \
// RUN:   --check '%t.opt check {pool}' -- %t.opt run %t.d/o.pool \
// RUN:   | %FileCheck %s --check-prefix=ROBUST
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-robust-setting=flit \
// RUN:   -mllvm -pmkit-trace -mllvm -pmkit-trace-loads %s %link_trace -o %t.flit
// RUN: %explore --model x86-line --robustness --no-progress --save-dir %t.d/flit \
// RUN:   --check '%t.flit check {pool}' -- %t.flit run %t.d/f.pool \
// RUN:   | %FileCheck %s --check-prefix=ROBUST
// ROBUST: robustness: 0 of {{[0-9]+}} crash images
// ROBUST: result: ok (exhaustive): every crash image
//
// The trace holds the asm writes: the store, and the cmpxchg as an RMW.
// RUN: rm -f %t.d/dump.pool
// RUN: %explore --dump -- %t.base run %t.d/dump.pool | %FileCheck %s --check-prefix=DUMP
// DUMP: store pool0+{{[0-9]+}} len=8 {{.*}}asm.c:67:
// DUMP: rmw pool0+{{[0-9]+}} len=8 val=1 {{.*}}asm.c:76:
//
// RUN: %clang_pm -O1 -g -mllvm -pmkit-trace -mllvm -pmkit-trace-loads %s \
// RUN:   %link_trace -o %t.plain
// RUN: %not %explore --stop-after 1 --model x86-line --robustness --no-progress \
// RUN:   --save-dir %t.d/plain --check '%t.plain check {pool}' -- %t.plain run %t.d/p.pool \
// RUN:   | %FileCheck %s --check-prefix=PLAIN
// PLAIN: robustness: {{[1-9][0-9]*}} of {{[0-9]+}} crash images
// PLAIN: asm.c:95:{{.*}}can be lost while the later store at {{.*}}asm.c:67:
// PLAIN: result: FAILED

#include <pmkit/pmkit.h>
#include <stdio.h>
#include <string.h>

#define N 4

struct log {
  unsigned long count;
  unsigned long sealed;
  unsigned long pad[6];
  unsigned long entry[N][8]; // a line each
};

static unsigned long value(unsigned long i) { return 1000 + 7 * i; }

static inline void store_ulong(unsigned long *target, unsigned long v) {
  __asm__ __volatile__("movq %1, %0"
                       : "=m"(*(char *)target)
                       : "r"(v)
                       : "memory");
}

static inline int cas_ulong(unsigned long *target, unsigned long old,
                            unsigned long v) {
  unsigned char z;
  __asm__ __volatile__("lock cmpxchgq %3, %0; setz %1"
                       : "+m"(*(char *)target), "=q"(z), "+a"(old)
                       : "q"(v)
                       : "memory", "cc");
  return z;
}

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  pmkit_pool *p;
  struct log *l;
  int create = !strcmp(argv[1], "run");
  int err = create ? pmkit_pool_create(argv[2], 8 << 20, NULL, &p)
                   : pmkit_pool_open(argv[2], NULL, &p);
  if (err || pmkit_root(p, sizeof *l, (void **)&l))
    return 2;
  if (create) {
    for (unsigned long i = 0; i < N; i++) {
      l->entry[i][0] = value(i);
      store_ulong(&l->count, i + 1);
    }
    cas_ulong(&l->sealed, 0, 1);
  } else {
    if (l->sealed && l->count != N) {
      printf("sealed at %lu entries\n", l->count);
      return 1;
    }
    for (unsigned long i = 0; i < l->count && i < N; i++)
      if (l->entry[i][0] != value(i)) {
        printf("entry %lu is missing\n", i);
        return 1;
      }
  }
  pmkit_pool_close(p);
  return 0;
}
