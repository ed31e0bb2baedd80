// SPDX-License-Identifier: Apache-2.0
// What the real-program tier's own programs (utpm.c, ckpm.c, ckfase.c) share.
#ifndef PMKIT_TESTS_REAL_REALPROG_H
#define PMKIT_TESTS_REAL_REALPROG_H

#include <time.h>

// Seconds on the monotonic clock, for the programs' `bench` runs.
static inline double real_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
