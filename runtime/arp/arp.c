/* SPDX-License-Identifier: Apache-2.0 */
/*
 * arp.c -- the out-of-line side of arp mode (include/pmkit/arp.hpp): the
 * __pmkit_arp_* calls pmkit::atomic makes around its acquires, releases
 * and sequence points. The pmkit-arp pass replaces these calls with the
 * fences of its lowering, so in a program built with `pmkit cc --mode arp`
 * they only run when the program is traced (the pass keeps them then, and
 * libpmkit-trace records each as an event for the explorer and the
 * simulator). Built without the pass, a persistent release or sequence
 * point still orders the flushes the program issued itself.
 */
#include "../core/mode.h"
#include "pmkit/abi.h"
#include "pmkit/trace_format.h"

void __pmkit_arp_release(const void *addr, uint64_t val, uint32_t size,
                         uint32_t flags) {
  pmk_trace_sync(PMKIT_EV_RELEASE, addr, val, size, flags);
  if (!(flags & PMKIT_SYNC_VOLATILE))
    pmk_fence();
}

void __pmkit_arp_acquire(const void *addr, uint64_t val, uint32_t size,
                         uint32_t flags) {
  pmk_trace_sync(PMKIT_EV_ACQUIRE, addr, val, size, flags);
}

void __pmkit_arp_seqpoint(uint32_t flags) {
  pmk_trace_sync(PMKIT_EV_SEQPOINT, NULL, 0, 0, flags);
  if (!(flags & PMKIT_SYNC_VOLATILE))
    pmk_fence();
}

/* Nothing to recover: arp mode keeps no state of its own in the pool. */
PMK_HIDDEN const struct pmk_mode pmk_arp_mode = {"arp", 0, NULL};
