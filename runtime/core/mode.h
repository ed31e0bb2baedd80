/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mode.h -- what the core offers the mode runtimes (runtime/<mode>/), and
 * all of it they may include: the persistence domain, the pool's layout and
 * handles, the FASE registry, the section's allocation journal cursor, and
 * the table of mode descriptors through which the core dispatches to them
 * (pmkit_recover). The core never names a mode: each mode defines one
 * `const struct pmk_mode pmk_<name>_mode` and runtime/modes.def lists it.
 */
#ifndef PMKIT_CORE_MODE_H
#define PMKIT_CORE_MODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base.h"
#include "layout.h"
#include "options.h"
#include "persist.h"
#include "pool.h"

/* A mode runtime as the core sees it. */
struct pmk_mode {
  const char *name;
  /* pmkit_recover calls the modes' recover in ascending order (ties in the
   * order of modes.def), each once per pool: a mode whose slots another
   * mode could misread goes first, and says why beside its number. */
  unsigned recover_order;
  /* Recover every section of this mode in flight in the pool: the number
   * recovered, or a negative PMKIT_E_*. NULL: nothing to recover. */
  int (*recover)(pmkit_pool *p);
};
/* The modes of runtime/modes.def, in its order, ending with NULL
 * (runtime/modes.c). */
PMK_HIDDEN extern const struct pmk_mode *const pmk_modes[];

/* ctx.c: the FASE tables of the failure-atomic runtimes (clobber, ssapp),
 * filled by the constructors their passes add. Their entries all begin
 * with the FASE's id and name. An entry is written before `n` admits it,
 * so lookups need no lock. */
#define PMK_MAX_FASES 1024u
struct pmk_fase_head {
  uint64_t id;
  const char *name;
};
struct pmk_registry {
  pthread_mutex_t lock;
  _Atomic uint32_t n;
  const struct pmk_fase_head *fase[PMK_MAX_FASES];
};
#define PMK_REGISTRY_INIT                                                      \
  {                                                                            \
    PTHREAD_MUTEX_INITIALIZER, 0, { 0 }                                        \
  }
/* Add n entries of `stride` bytes from t; two FASEs with one id, or too
 * many, stop the program with a message naming `mode`. */
PMK_HIDDEN void pmk_registry_add(struct pmk_registry *r, const void *t,
                                 size_t stride, uint32_t n, const char *mode);
/* The entry with this id, or NULL. */
PMK_HIDDEN const void *pmk_registry_find(struct pmk_registry *r, uint64_t id);
/* A failure a FASE cannot report to its caller: the program stops, as it
 * would on a failed assertion, with "pmkit MODE: FASE NAME: WHAT: DETAIL". */
PMK_HIDDEN _Noreturn void pmk_fase_fail(const char *mode,
                                        const struct pmk_fase_head *fase,
                                        const char *what, const char *detail);

/* The calling thread's section in flight in p (ctx.c): the allocations
 * and frees it has journaled so far, and, for a re-execution
 * (pmkit_fase_replay), the journal entry its next allocation replays. */
PMK_HIDDEN uint64_t pmk_fase_journaled(pmkit_pool *p);
PMK_HIDDEN void pmk_fase_replay_from(pmkit_pool *p, uint64_t entry);

#endif /* PMKIT_CORE_MODE_H */
