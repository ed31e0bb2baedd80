/* SPDX-License-Identifier: Apache-2.0 */
/*
 * x86_64.c -- the runtime's table of the CPU (arch.h) for x86-64: CPUID
 * tells which write-back instructions exist (clwb > clflushopt > clflush),
 * the instructions themselves, and sfence.
 */
#include <cpuid.h>

#include "../arch.h"

static int has(pmkit_flush_t k) {
  unsigned a, b, c, d;
  switch (k) {
  case PMKIT_FLUSH_NONE:
    return 1;
  case PMKIT_FLUSH_CLFLUSH:
    return __get_cpuid(1, &a, &b, &c, &d) && (d & (1u << 19));
  case PMKIT_FLUSH_CLFLUSHOPT:
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23));
  case PMKIT_FLUSH_CLWB:
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 24));
  }
  return 0;
}

/* Encoded by hand so no -m flag is needed: clwb is 66 0f ae /6,
 * clflushopt 66 0f ae /7, clflush 0f ae /7. */
static void clwb(const void *p) {
  __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x30" ::"a"(p) : "memory");
}
static void clflushopt(const void *p) {
  __asm__ volatile(".byte 0x66, 0x0f, 0xae, 0x38" ::"a"(p) : "memory");
}
static void clflush(const void *p) {
  __asm__ volatile("clflush (%0)" ::"r"(p) : "memory");
}
static void none(const void *p) { (void)p; }

static void sfence(void) { __asm__ volatile("sfence" ::: "memory"); }

const struct pmk_arch pmk_arch = {
    .name = "x86-64",
    .has = has,
    .flush_line =
        {
            [PMKIT_FLUSH_NONE] = none,
            [PMKIT_FLUSH_CLFLUSH] = clflush,
            [PMKIT_FLUSH_CLFLUSHOPT] = clflushopt,
            [PMKIT_FLUSH_CLWB] = clwb,
        },
    .fence = sfence,
};
