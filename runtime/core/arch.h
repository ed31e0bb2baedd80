/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arch.h -- the hardware boundary: what the runtime asks of the CPU, in one
 * table that the file of runtime/core/arch/ for the architecture built for
 * fills (x86_64.c; the build refuses any other). flush.c picks the
 * write-back instruction from it once, at start-up.
 */
#ifndef PMKIT_CORE_ARCH_H
#define PMKIT_CORE_ARCH_H

#include "base.h"

#if !defined(__x86_64__)
#error "pmkit's runtime is written for x86-64 only (runtime/core/arch/)"
#endif

struct pmk_arch {
  const char *name;
  /* 1 if this CPU has write-back instruction k (PMKIT_FLUSH_NONE: always). */
  int (*has)(pmkit_flush_t k);
  /* Write back the cache line holding p with instruction k; NONE: nothing. */
  void (*flush_line[PMKIT_FLUSH_CLWB + 1])(const void *p);
  /* Order the write-backs issued before it before the stores after it. */
  void (*fence)(void);
};
PMK_HIDDEN extern const struct pmk_arch pmk_arch;

/* In a spin loop: let the other hyper-thread run. */
static inline void pmk_cpu_relax(void) { __builtin_ia32_pause(); }

#endif /* PMKIT_CORE_ARCH_H */
