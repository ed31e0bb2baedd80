/* SPDX-License-Identifier: Apache-2.0 */
/*
 * abi.h -- the contract between pmkit's compiler passes and its runtimes:
 * every function a pass inserts a call to is declared here with the
 * `__pmkit_` prefix, together with the data instrumentation may read inline.
 * Passes and runtimes are built from the same tree, but a program compiled
 * against one ABI version must not run with another: bump PMKIT_ABI_VERSION
 * with any change below and say what changed in the log at the end.
 */
#ifndef PMKIT_ABI_H
#define PMKIT_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMKIT_ABI_VERSION 1u

/* The ABI version the linked runtime implements. Instrumented programs may
 * compare it with PMKIT_ABI_VERSION at start-up. */
extern const uint32_t __pmkit_abi_version;

/* Bounding box [lo, hi) of all open pools, updated at open/close. An address
 * outside it is not in any pool; inside it, pmkit_in_pool() decides. Lets
 * instrumentation skip DRAM accesses with two compares and no call. */
extern uintptr_t __pmkit_pool_lo;
extern uintptr_t __pmkit_pool_hi;

static inline int __pmkit_maybe_pm(const void *p) {
  uintptr_t a = (uintptr_t)p;
  return a >= __pmkit_pool_lo && a < __pmkit_pool_hi;
}

/* A crash point (see PMKIT_CRASH_AT in pmkit.h). Passes insert it where a
 * mode defines one; it returns at once unless crash emulation is armed. */
void __pmkit_crash_point(void);

/* Owners of the persistent words of a thread context (pmkit_ctx_ext). */
enum {
  PMKIT_EXT_CLOBBER = 0, /* words 0..3   */
  PMKIT_EXT_SSAPP = 4,   /* words 4..7   */
  PMKIT_EXT_ARP = 8,     /* words 8..11  */
  PMKIT_EXT_USER = 12,   /* words 12..15 */
};

/*
 * Version log
 *   1  first version: __pmkit_abi_version, pool bounding box,
 *      __pmkit_crash_point, context extension slots.
 */

#ifdef __cplusplus
}
#endif
#endif /* PMKIT_ABI_H */
