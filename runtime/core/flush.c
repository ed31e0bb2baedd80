/* SPDX-License-Identifier: Apache-2.0 */
/*
 * flush.c -- the persistence domain and the runtime's write-backs and
 * fences (STYLE rule 5): the write-back instruction is picked once, at
 * start-up, from what the CPU has (the architecture's table, arch.h:
 * clwb > clflushopt > clflush, overridable with
 * PMKIT_FLUSH=clwb|clflushopt|clflush|none). Also the library constructor
 * pmk_init(), which reads every PMKIT_* variable once; public entry points
 * that may run before constructors call it lazily.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "internal.h"

int pmk_eadr;
static pmkit_flush_t pmk_flush_kind = PMKIT_FLUSH_CLFLUSH;
/* A write-back before the constructor ran picks the instruction first. */
static void flush_first(const void *p);
void (*pmk_flush_fn)(const void *p) = flush_first;
static pthread_once_t pmk_once = PTHREAD_ONCE_INIT;

void pmk_crash_init(void); /* crash.c */

static int cpu_has(pmkit_flush_t k) { return pmk_arch.has(k); }

/* The one place the kind changes: the write-back follows it. */
static void set_kind(pmkit_flush_t k) {
  pmk_flush_kind = k;
  pmk_flush_fn = pmk_arch.flush_line[k];
}

static void init_once(void) {
#ifdef PMKIT_FORCE_EADR
  pmk_eadr = 1;
#else
  pmk_eadr = pmk_opt_is(PMK_OPT_DOMAIN, "eadr");
#endif
  set_kind(PMKIT_FLUSH_CLFLUSH);
  if (cpu_has(PMKIT_FLUSH_CLWB))
    set_kind(PMKIT_FLUSH_CLWB);
  else if (cpu_has(PMKIT_FLUSH_CLFLUSHOPT))
    set_kind(PMKIT_FLUSH_CLFLUSHOPT);
  static const pmkit_flush_t kinds[] = {PMKIT_FLUSH_CLWB,
                                        PMKIT_FLUSH_CLFLUSHOPT,
                                        PMKIT_FLUSH_CLFLUSH, PMKIT_FLUSH_NONE};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    if (!pmk_opt_is(PMK_OPT_FLUSH, pmkit_flush_name(kinds[i])))
      continue;
    if (cpu_has(kinds[i]))
      set_kind(kinds[i]);
    else
      fprintf(stderr,
              "pmkit: PMKIT_FLUSH=%s: this CPU lacks the instruction; "
              "using %s\n",
              pmk_opt_text(PMK_OPT_FLUSH), pmkit_flush_name(pmk_flush_kind));
  }
  if (pmk_eadr)
    set_kind(PMKIT_FLUSH_NONE);
  pmk_crash_init();
}

__attribute__((constructor)) void pmk_init(void) {
  pthread_once(&pmk_once, init_once);
}

static void flush_first(const void *p) {
  pmk_init();
  pmk_flush_fn(p);
}

void pmk_use_eadr(void) {
  pmk_init();
  pmk_eadr = 1;
  set_kind(PMKIT_FLUSH_NONE);
}

pmkit_domain_t pmkit_domain(void) {
  pmk_init();
  return pmk_eadr ? PMKIT_DOMAIN_EADR : PMKIT_DOMAIN_ADR;
}

pmkit_flush_t pmkit_flush_kind(void) {
  pmk_init();
  return pmk_flush_kind;
}

const char *pmkit_flush_name(pmkit_flush_t k) {
  switch (k) {
  case PMKIT_FLUSH_NONE:
    return "none";
  case PMKIT_FLUSH_CLFLUSH:
    return "clflush";
  case PMKIT_FLUSH_CLFLUSHOPT:
    return "clflushopt";
  case PMKIT_FLUSH_CLWB:
    return "clwb";
  }
  return "?";
}

void pmkit_flush(const void *addr, size_t len) {
#ifndef PMKIT_FORCE_EADR
  if (pmk_flush_kind == PMKIT_FLUSH_NONE || len == 0)
    return;
  uintptr_t a = (uintptr_t)addr & ~(uintptr_t)63;
  uintptr_t end = (uintptr_t)addr + len;
  for (; a < end; a += 64)
    pmk_flush_line((const void *)a);
#else
  (void)addr;
  (void)len;
#endif
}

/* The pass ABI's range flush (abi.h): what pmkit-robust calls after a
 * memcpy or memset into PM, whose length it cannot see. */
void __pmkit_flush_range(const void *addr, uint64_t len) {
  pmkit_flush(addr, (size_t)len);
}

__thread uint64_t pmk_sfences;

void pmk_fence(void) {
  if (pmk_flush_kind != PMKIT_FLUSH_NONE) {
    pmk_arch.fence();
    pmk_sfences++;
  } else
    __asm__ volatile("" ::: "memory");
}

void pmkit_fence(void) {
  pmk_crash_point();
  pmk_fence();
}

void pmkit_persist(const void *addr, size_t len) {
  pmkit_flush(addr, len);
  pmkit_fence();
}
