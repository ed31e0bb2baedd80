/* SPDX-License-Identifier: Apache-2.0 */
/*
 * persist.h -- the persistence domain as the runtime sees it: write-backs and
 * fences (flush.c), crash points (crash.c), the persist helpers for the
 * runtime's own metadata, and the tracer's hooks (runtime/trace).
 */
#ifndef PMKIT_CORE_PERSIST_H
#define PMKIT_CORE_PERSIST_H

#include <stdint.h>

#include "base.h"

/* flush.c */
PMK_HIDDEN void pmk_init(void);
PMK_HIDDEN extern int pmk_eadr;
/* Write back the line holding p with the instruction chosen at start-up
 * (nothing under eADR): set once by pmk_init, before any pool is open. */
PMK_HIDDEN extern void (*pmk_flush_fn)(const void *p);
static inline void pmk_flush_line(const void *p) { pmk_flush_fn(p); }
/* pmkit_fence without the crash point, for the runtime's own ordering. */
PMK_HIDDEN void pmk_fence(void);
/* The process runs on an eADR platform whatever PMKIT_DOMAIN says (a module
 * built for eADR, e.g. clobber mode's -pmkit-clobber-domain=eadr, says so):
 * no write-backs, fences only order the compiler. */
PMK_HIDDEN void pmk_use_eadr(void);
/* sfences issued by the calling thread (ADR only), for per-FASE counts. */
PMK_HIDDEN extern __thread uint64_t pmk_sfences;

/* crash.c. pmk_crash_armed: fence points count (pmk_crash_point);
 * pmk_crash_stores: every PM store is a point (PMKIT_CRASH_POINTS=stores or
 * all), ticked by runtime/trace's hooks. */
PMK_HIDDEN extern int pmk_crash_armed;
PMK_HIDDEN extern int pmk_crash_stores;
PMK_HIDDEN void pmk_crash_tick(void);
/* Store points were asked for and cannot be counted: message, exit 2. */
PMK_HIDDEN _Noreturn void pmk_crash_need_stores(void);
static inline void pmk_crash_point(void) {
  if (PMK_UNLIKELY(pmk_crash_armed))
    pmk_crash_tick();
}

/* Persist helpers for runtime metadata: store, flush, (no fence); the
 * _line form leaves the flush to the caller, for stores to one line. */
static inline void pmk_store64_line(uint64_t *w, uint64_t v) {
  pmk_crash_point();
  __atomic_store_n(w, v, __ATOMIC_RELEASE);
}
static inline void pmk_store64(uint64_t *w, uint64_t v) {
  pmk_store64_line(w, v);
  pmk_flush_line(w);
}

/* Tracing hooks (runtime/trace), called once a pool is registered and mapped
 * and before it is unregistered; nothing in a library built without it. */
#ifdef PMKIT_TRACED
PMK_HIDDEN void pmk_trace_pool_open(pmkit_pool *p);
PMK_HIDDEN void pmk_trace_pool_close(pmkit_pool *p);
/* An ACQUIRE, RELEASE or SEQPOINT event (runtime/arp). */
PMK_HIDDEN void pmk_trace_sync(uint8_t kind, const void *addr, uint64_t val,
                               uint32_t size, uint32_t flags);
#else
static inline void pmk_trace_pool_open(pmkit_pool *p) { (void)p; }
static inline void pmk_trace_pool_close(pmkit_pool *p) { (void)p; }
static inline void pmk_trace_sync(uint8_t kind, const void *addr, uint64_t val,
                                  uint32_t size, uint32_t flags) {
  (void)kind, (void)addr, (void)val, (void)size, (void)flags;
}
#endif

#endif /* PMKIT_CORE_PERSIST_H */
