// SPDX-License-Identifier: Apache-2.0
// pmkit-robust on C its analysis does not model precisely: setjmp, varargs,
// computed goto, a VLA of PM pointers, bit-fields and unions, vectors,
// 128-bit integers and atomics, pointers laundered through integers,
// inline asm storing to memory, memmove, recursion through a function
// pointer and irreducible control flow. In every setting and at -O0 and
// -O2 the compiler must finish and leave IR that verifies; where the
// analysis loses a PM pointer it falls back to flushing and fencing it
// (checked below for the laundered pointer and the inline asm).
//
// RUN: %clang_pm -O0 -g -S -emit-llvm %s -o %t0.ll
// RUN: %clang_pm -O2 -g -S -emit-llvm %s -o %t2.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify -disable-output %t0.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify -disable-output %t2.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify \
// RUN:   -pmkit-robust-setting=opt -disable-output %t0.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify \
// RUN:   -pmkit-robust-setting=flit -disable-output %t0.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify \
// RUN:   -pmkit-robust-setting=flit -disable-output %t2.ll
// RUN: %opt -passes=pmkit-annotations,pmkit-robust,verify \
// RUN:   -pmkit-robust-setting=opt -S %t2.ll | grep -v llvm.dbg.value \
// RUN:   | %FileCheck %s
// The same through the compiler driver, as `pmkit cc --mode=robust` runs it.
// RUN: %clang_pm -O2 -mllvm -pmkit-mode=robust -mllvm \
// RUN:   -pmkit-robust-setting=flit -c %s -o %t.o

#include <pmkit/pmkit.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

pmkit_pool *pool;

struct rec {
  unsigned a : 3, b : 13;
  union {
    long l;
    double d;
    char c[8];
  } u;
  __int128 wide;
  _Atomic __int128 awide;
  long v[];
};

typedef long v4 __attribute__((vector_size(32)));

static struct rec *rec(void) { return pmkit_pool_base(pool); }

// setjmp/longjmp: returns twice.
jmp_buf jb;
void jumpy(int n) {
  struct rec *r = rec();
  if (setjmp(jb)) {
    r->u.l = 2;
    return;
  }
  r->u.l = 1;
  if (n)
    longjmp(jb, 1);
}

// Variadic: a PM pointer through va_arg.
void vsum(int n, ...) {
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    long *p = va_arg(ap, long *);
    *p = i;
  }
  va_end(ap);
}

// Computed goto.
void jumps(int k) {
  static void *tab[] = {&&one, &&two};
  struct rec *r = rec();
  goto *tab[k & 1];
one:
  r->a = 1;
  return;
two:
  r->b = 2;
}

// A variable-length array of PM pointers on the stack.
void vla(int n) {
  long *ps[n];
  for (int i = 0; i < n; i++)
    ps[i] = &rec()->v[i];
  for (int i = 0; i < n; i++)
    *ps[i] = i;
}

// Vectors, wide integers and 16-byte atomics.
void wide(v4 x) {
  struct rec *r = rec();
  memcpy(r->v, &x, sizeof x);
  r->wide = (__int128)x[0] << 64;
  atomic_store(&r->awide, r->wide);
  __int128 old = atomic_load(&r->awide);
  atomic_compare_exchange_strong(&r->awide, &old, old + 1);
}

// Pointer laundering through integers and an unknown inline asm store.
void laundered(uintptr_t off) {
  char *base = (char *)rec();
  long *p = (long *)((uintptr_t)base + (off ^ 0x40));
  *p = 3;
  __asm__ volatile("movq $1, (%0)" ::"r"(p) : "memory");
  memmove(base + 8, base, 64);
}

// Recursion through a function pointer.
long walk(long (*f)(long *, int), long *p, int d) { return f(p, d); }
long step(long *p, int d) {
  *p = d;
  return d ? walk(step, p + 1, d - 1) : 0;
}

// Irreducible control flow.
void irreducible(int c, int n) {
  struct rec *r = rec();
  int i = 0;
  if (c)
    goto b;
a:
  r->v[i] = i;
b:
  if (++i < n)
    goto a;
}

// CHECK-LABEL: define {{.*}} @laundered(
// CHECK: store i64 3
// CHECK: call void @llvm.x86.clwb
// CHECK: call void @llvm.x86.sse.sfence()
// CHECK: call void asm sideeffect
