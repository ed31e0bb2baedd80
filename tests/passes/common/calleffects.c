// SPDX-License-Identifier: Apache-2.0
// The one table of what external functions do (passes/Common/CallEffects.def)
// answers every pass's question, and its diagnostics are clang's.
//
// clobber: a FASE may call pmkit's pure queries (pmkit_off, pmkit_in_pool:
// once refused as unknown); rand is the world's, unknown to a re-executed
// FASE: refused.
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=QUERY --allow-empty \
// RUN:     --implicit-check-not=error --implicit-check-not=warning
// QUERY-NOT: {{.}}
// RUN: %not %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -DRAND -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=RAND
// RAND: calleffects.c:[[#@LINE+30]]:{{[0-9]+}}: error: pmkit-clobber: FASE with_rand calls external function 'rand' with unknown side effects
//
// robust: strtol stores its end pointer through argument 1; into PM that
// write is not written back, and the pass says so -- not for a stack slot.
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=robust -DSTRTOL -c %s \
// RUN:   -o /dev/null 2>&1 | %FileCheck %s --check-prefix=STRTOL
// STRTOL: calleffects.c:[[#@LINE+31]]:{{[0-9]+}}: warning: pmkit-robust: strtol may write PM in a way robust mode does not model
// STRTOL-NOT: warning:
// -Werror makes the warning an error.
// RUN: %not %clang_pm -O2 -g -Werror -mllvm -pmkit-mode=robust -DSTRTOL \
// RUN:   -c %s -o /dev/null 2>&1 | %FileCheck %s --check-prefix=WERROR
// WERROR: error: pmkit-robust: strtol may write PM

#include <pmkit/annotations.h>
#include <pmkit/pmkit.h>
#include <stdlib.h>

pmkit_pool *pool;

struct root {
  long n;
  char *end;
  char text[16];
};

PMKIT_FASE void set_from(struct root *r, const char *s) {
  r->n = (long)pmkit_off(pool, r) + pmkit_in_pool(s);
}

#ifdef RAND
PMKIT_FASE void with_rand(struct root *r) { r->n = rand(); }
#endif

#ifdef STRTOL
long parse(struct root *r) {
  char *local;
  long a = strtol(r->text, &local, 10);
  return a + strtol(r->text, &r->end, 10);
}
#endif
