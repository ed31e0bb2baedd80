// SPDX-License-Identifier: Apache-2.0
// Bad input to ssapp mode gets a diagnostic naming the source line, never a
// crash: constructs a resumed FASE could not handle. One FASE per macro.
//
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DEXTERNAL -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=EXT
// EXT: diag.c:[[#@LINE+45]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_external calls send_packet, whose effect on persistent memory is unknown
// Allowed (calling it again is harmless), the build succeeds.
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DEXTERNAL \
// RUN:   -mllvm -pmkit-ssapp-allow=send_packet -c %s -o /dev/null
//
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DVARIADIC -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=VA
// VA: diag.c:[[#@LINE+43]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_printf calls variadic function printf
//
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DSETJMP -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=SJ
// SJ: diag.c:[[#@LINE+44]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_setjmp calls _setjmp (setjmp-like)
//
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DDRAMLOCK -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=LOCK
// LOCK: diag.c:[[#@LINE+47]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_dram_lock uses a volatile lock (pthread_mutex_lock)
//
// An RMW needs a spare bit for its tag: none in a 32-bit word, none known
// in a 64-bit integer unless the program says so.
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DRMW32 -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=R32
// R32: diag.c:[[#@LINE+47]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_rmw32 makes an atomic read-modify-write of a 32-bit word
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DRMW64 -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=R64
// R64: diag.c:[[#@LINE+47]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_rmw64 makes an atomic read-modify-write of a 64-bit integer
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DRMW64 \
// RUN:   -mllvm -pmkit-ssapp-rmw-ints -c %s -o /dev/null
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DMAX -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=MAX
// MAX: diag.c:[[#@LINE+46]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_max uses atomic umax, which ssapp mode does not make detectable
//
// An indirect call.
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=ssapp -DINDIRECT -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=IND
// IND: diag.c:[[#@LINE+45]]:{{[0-9]+}}: error: pmkit-ssapp: FASE with_indirect makes an indirect call
#include <pmkit/pmkit.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#ifdef EXTERNAL
void send_packet(uint64_t *p);
PMKIT_FASE void with_external(uint64_t *p) {
  send_packet(p);
  *p = 1;
}
#endif
#ifdef VARIADIC
PMKIT_FASE void with_printf(uint64_t *p) { printf("%lu\n", (unsigned long)*p); }
#endif
#ifdef SETJMP
jmp_buf env;
PMKIT_FASE void with_setjmp(uint64_t *p) {
  if (!setjmp(env))
    *p = 2;
}
#endif
#ifdef DRAMLOCK
pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
PMKIT_FASE void with_dram_lock(uint64_t *p) {
  pthread_mutex_lock(&m);
  *p += 1;
  pthread_mutex_unlock(&m);
}
#endif
#ifdef RMW32
PMKIT_FASE void with_rmw32(_Atomic uint32_t *p) { atomic_fetch_add(p, 1); }
#endif
#ifdef RMW64
PMKIT_FASE void with_rmw64(_Atomic uint64_t *p) { atomic_fetch_add(p, 1); }
#endif
#ifdef MAX
PMKIT_FASE void with_max(uint64_t *p, uint64_t v) {
  __atomic_fetch_max(p, v, __ATOMIC_SEQ_CST);
}
#endif
#ifdef INDIRECT
PMKIT_FASE void with_indirect(void (*fn)(uint64_t *), uint64_t *p) { fn(p); }
#endif
