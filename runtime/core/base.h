/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base.h -- what every file of the runtime uses: hidden visibility, branch
 * hints, the error slot (error.c) and the hash the runtime checks its
 * records with (pool.c).
 */
#ifndef PMKIT_CORE_BASE_H
#define PMKIT_CORE_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "pmkit/pmkit.h"

#define PMK_HIDDEN __attribute__((visibility("hidden")))
#define PMK_LIKELY(x) __builtin_expect(!!(x), 1)
#define PMK_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* error.c */
PMK_HIDDEN int pmk_err(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Replace the message with pre + sep + the message + post (a path and ": "
 * to name the pool, say), returning code. */
PMK_HIDDEN int pmk_err_wrap(int code, const char *pre, const char *sep,
                            const char *post);
/* Set by pmk_err, cleared at the entry of every public function that can
 * fail: whether the message is the calling thread's last failure. In
 * static TLS, so that clearing it is one store on the fast paths. */
PMK_HIDDEN extern __thread unsigned char pmk_has_msg
    __attribute__((tls_model("initial-exec")));
static inline void pmk_clear_err(void) { pmk_has_msg = 0; }

/* FNV-1a 64 (pool.c). */
PMK_HIDDEN uint64_t pmk_fnv1a(const void *p, size_t n);

#endif /* PMKIT_CORE_BASE_H */
