/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testutil.h -- the few helpers the runtime tests share: CHECK macros that
 * print the failing expression with pmkit_errormsg() and exit 1, and a
 * scratch directory for pool files (PMKIT_TEST_DIR, else /dev/shm).
 */
#ifndef PMKIT_TESTUTIL_H
#define PMKIT_TESTUTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pmkit/pmkit.h"

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s (pmkit: %s)\n", __FILE__,       \
              __LINE__, #cond, pmkit_errormsg());                              \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CHECK_RC(expr, want)                                                   \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_ != (want)) {                                                       \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (pmkit: %s)\n",      \
              __FILE__, __LINE__, #expr, pmkit_strerror(rc_),                  \
              pmkit_strerror(want), pmkit_errormsg());                         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, PMKIT_OK)

/* A fresh pool path "<dir>/<name>.<pid>.pool"; any old file is removed. */
static inline const char *test_pool_path(const char *name) {
  static char buf[4][1024];
  static int k;
  const char *dir = getenv("PMKIT_TEST_DIR");
  if (!dir || !*dir)
    dir = "/dev/shm";
  mkdir(dir, 0755);
  char *b = buf[k++ & 3];
  snprintf(b, sizeof buf[0], "%s/%s.%d.pool", dir, name, (int)getpid());
  unlink(b);
  return b;
}

/* xorshift64*: deterministic test randomness. */
static inline uint64_t test_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

#endif
