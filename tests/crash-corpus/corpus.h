/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corpus.h -- the command line and the in-process checker entry point that
 * every program of the crash corpus shares. A program defines CORPUS_LAYOUT
 * (its pool layout name), includes this header, and defines
 *   static int corpus_run(pmkit_pool *pool);
 *     its operations, on a freshly created pool: 0 or a PMKIT_E_* code;
 *   static int corpus_check(pmkit_pool *pool, char *why, size_t wn);
 *     its recovery, then its validation: 0 if the pool is consistent, else
 *     corpus_bad(why, wn, ...) with the first problem.
 * It then gets `prog run POOL` (create POOL, which must not exist, and run
 * the operations), `prog check POOL` (open, recover, validate; exit 0 if
 * consistent, 1 if not, 2 if POOL cannot be opened or on a usage error) and,
 * compiled with -DPMKIT_CHECK_LIB, instead of main the function
 * `int pmkit_check(void *pool_base)` that `pmkit explore --check-lib` calls on
 * a crash image mapped at its base address. Both checkers also require the
 * pool's own metadata (allocator, contexts) to pass pmkit_pool_check.
 */
#ifndef PMKIT_CORPUS_H
#define PMKIT_CORPUS_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pmkit/pmkit.h"

#ifndef CORPUS_LAYOUT
#error "define CORPUS_LAYOUT before including corpus.h"
#endif

static int corpus_run(pmkit_pool *pool);
static int corpus_check(pmkit_pool *pool, char *why, size_t wn);

/* Record why a pool is inconsistent; returns -1 for `return corpus_bad(..)`. */
__attribute__((format(printf, 3, 4))) static int
corpus_bad(char *why, size_t wn, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, wn, fmt, ap);
  va_end(ap);
  return -1;
}

/* The root object of a program, created zeroed if a crash came before the
 * run created it: an empty pool is a consistent one. */
static int corpus_root(pmkit_pool *pool, size_t size, void *out, char *why,
                       size_t wn) {
  int err = pmkit_root(pool, size, (void **)out);
  if (err)
    return corpus_bad(why, wn, "root object: %s: %s", pmkit_strerror(err),
                      pmkit_errormsg());
  return 0;
}

/* The program's recovery and checks, then the pool's own. */
static int corpus_validate(pmkit_pool *pool, char *why, size_t wn) {
  if (corpus_check(pool, why, wn))
    return -1;
  if (pmkit_pool_check(pool))
    return corpus_bad(why, wn, "pool metadata: %s", pmkit_errormsg());
  return 0;
}

#ifdef PMKIT_CHECK_LIB

__attribute__((visibility("default"))) int pmkit_check(void *pool_base);

int pmkit_check(void *pool_base) {
  char why[256] = "";
  pmkit_pool *pool;
  (void)corpus_run; /* only the executable runs the operations */
  int err = pmkit_pool_attach(pool_base, &pool);
  if (err) {
    fprintf(stderr, "%s: cannot attach the image: %s: %s\n", CORPUS_LAYOUT,
            pmkit_strerror(err), pmkit_errormsg());
    return 2;
  }
  int bad = corpus_validate(pool, why, sizeof why);
  if (bad)
    fprintf(stderr, "%s: INCONSISTENT: %s\n", CORPUS_LAYOUT, why);
  pmkit_pool_close(pool);
  return bad ? 1 : 0;
}

#else /* the executable */

static int corpus_usage(const char *prog) {
  fprintf(stderr, "usage: %s run POOL | check POOL\n", prog);
  return 2;
}

static int corpus_cmd_run(const char *path) {
  pmkit_pool_opts opts = {.layout = CORPUS_LAYOUT};
  pmkit_pool *pool;
  int err = pmkit_pool_create(path, PMKIT_POOL_MIN_SIZE, &opts, &pool);
  if (err) {
    fprintf(stderr, "%s: %s: %s\n", path, pmkit_strerror(err),
            pmkit_errormsg());
    return 2;
  }
  err = corpus_run(pool);
  if (err)
    fprintf(stderr, "%s: run: %s: %s\n", path, pmkit_strerror(err),
            pmkit_errormsg());
  pmkit_pool_close(pool);
  return err ? 2 : 0;
}

static int corpus_cmd_check(const char *path) {
  pmkit_pool_opts opts = {.layout = CORPUS_LAYOUT};
  pmkit_pool *pool;
  char why[256] = "";
  int err = pmkit_pool_open(path, &opts, &pool);
  if (err) {
    fprintf(stderr, "%s: %s: %s\n", path, pmkit_strerror(err),
            pmkit_errormsg());
    return 2;
  }
  int bad = corpus_validate(pool, why, sizeof why);
  if (bad)
    printf("INCONSISTENT: %s\n", why);
  else
    printf("consistent\n");
  pmkit_pool_close(pool);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc != 3)
    return corpus_usage(argv[0]);
  if (!strcmp(argv[1], "run"))
    return corpus_cmd_run(argv[2]);
  if (!strcmp(argv[1], "check"))
    return corpus_cmd_check(argv[2]);
  return corpus_usage(argv[0]);
}

#endif /* PMKIT_CHECK_LIB */
#endif /* PMKIT_CORPUS_H */
