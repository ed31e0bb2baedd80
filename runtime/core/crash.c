/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crash.c -- emulated power failures at crash points. PMKIT_CRASH_AT=N ends
 * the process at the N-th point; PMKIT_CRASH_SEED=S at each point with
 * probability 1/PMKIT_CRASH_EVERY (default 1000), from a generator seeded by
 * S; PMKIT_CRASH_REPORT=FILE writes the number of points passed at normal
 * exit. The process ends with _exit(PMKIT_CRASH_EXIT): no atexit handlers, no
 * stdio flush, every thread gone at once. On a pool in a tmpfs file every
 * retired store survives, which is exactly the eADR failure model.
 *
 * PMKIT_CRASH_POINTS chooses what a point is: `fences` (the default) the
 * callers of pmk_crash_point -- pmkit_fence, the allocator's stores, the
 * points of the mode runtimes; `stores` every PM store of the program and
 * the runtime, before it takes effect (store, NT store, RMW, memset,
 * memcpy), counted by the hooks of runtime/trace, so only in a program
 * built with `pmkit cc --trace`; `all` both. A `stores` request the process
 * cannot honour is an error (exit status 2), never a silent fences-only run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int pmk_crash_armed;  /* fence points count */
int pmk_crash_stores; /* store points count (runtime/trace) */
static _Atomic uint64_t pmk_points;
static uint64_t crash_at;    /* 0 = off */
static uint64_t crash_every; /* with a seed */
static _Atomic uint64_t rng_state;
static const char *report_path;

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void write_report(void) {
  FILE *f = fopen(report_path, "w");
  if (!f)
    return;
  fprintf(f, "%llu\n", (unsigned long long)atomic_load(&pmk_points));
  fclose(f);
}

/* Whether path can be written: the file, or else its folder. */
static int writable(const char *path) {
  if (access(path, W_OK) == 0)
    return 1;
  if (errno != ENOENT)
    return 0;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    return access(".", W_OK | X_OK) == 0;
  if (slash == dir)
    slash++; /* "/file": the root */
  *slash = 0;
  return access(dir, W_OK | X_OK) == 0;
}

enum { POINTS_FENCES = 1, POINTS_STORES = 2 };

static int points_of(void) {
  if (pmk_opt_is(PMK_OPT_CRASH_POINTS, "stores"))
    return POINTS_STORES;
  if (pmk_opt_is(PMK_OPT_CRASH_POINTS, "all"))
    return POINTS_FENCES | POINTS_STORES;
  return POINTS_FENCES;
}

_Noreturn void pmk_crash_need_stores(void) {
  fprintf(stderr,
          "pmkit: PMKIT_CRASH_POINTS=%s needs a program built with pmkit cc "
          "--trace: no instrumented code reports this program's PM stores\n",
          pmk_opt_text(PMK_OPT_CRASH_POINTS));
  _exit(2);
}

void pmk_crash_init(void) {
  int points = points_of();
  crash_at = pmk_opt_num(PMK_OPT_CRASH_AT);
  if (*pmk_opt_text(PMK_OPT_CRASH_SEED)) {
    atomic_store(&rng_state, pmk_opt_num(PMK_OPT_CRASH_SEED));
    crash_every = pmk_opt_num(PMK_OPT_CRASH_EVERY);
    if (crash_every == 0) {
      fprintf(stderr, "pmkit: PMKIT_CRASH_EVERY=0: one crash in 0 points is "
                      "no rate; give 1 or more\n");
      _exit(2);
    }
  }
  report_path = pmk_opt_text(PMK_OPT_CRASH_REPORT);
  if (*report_path) {
    /* Refused now, not lost at exit: a sweep that counts the points must
     * not go on with no count. (Checked without creating the file: a run
     * refused later leaves none.) */
    if (!writable(report_path)) {
      fprintf(stderr, "pmkit: cannot write PMKIT_CRASH_REPORT=%s: %s\n",
              report_path, strerror(errno));
      _exit(2);
    }
    atexit(write_report);
  } else
    report_path = NULL;
  int armed = crash_at || crash_every || report_path;
  pmk_crash_armed = armed && (points & POINTS_FENCES);
  pmk_crash_stores = armed && (points & POINTS_STORES);
#ifndef PMKIT_TRACED
  /* Plain libpmkit: nothing here reports stores. (libpmkit-trace checks at
   * the first pool registration that instrumented code registered.) */
  if (pmk_crash_stores)
    pmk_crash_need_stores();
#endif
}

static _Noreturn void crash_now(void) { _exit(PMKIT_CRASH_EXIT); }

void pmk_crash_tick(void) {
  uint64_t n = atomic_fetch_add(&pmk_points, 1) + 1;
  if (crash_at && n == crash_at)
    crash_now();
  if (crash_every) {
    uint64_t s = atomic_load(&rng_state), next, r;
    do {
      next = s;
      r = splitmix(&next);
    } while (!atomic_compare_exchange_weak(&rng_state, &s, next));
    if (r % crash_every == 0)
      crash_now();
  }
}

void pmkit_crash_point(void) {
  pmk_init();
  pmk_crash_point();
}
void __pmkit_crash_point(void) { pmk_crash_point(); }
uint64_t pmkit_crash_count(void) { return atomic_load(&pmk_points); }
