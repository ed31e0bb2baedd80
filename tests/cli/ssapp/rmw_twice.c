// SPDX-License-Identifier: Apache-2.0
// FASEs one after another, each an atomic compare-and-swap increment of a word
// and a count of its FASEs done, with no other RMW between them. Two FASEs of
// the same shape take turns, each on its own word: their RMWs have the same
// RISE number and, in fresh frames, the same torn bit. The shapes in which
// SSAPP recovery once took an RMW attempt for the interrupted one when it was
// not: one two executions old of the same RISE, and one of the other FASE
// (tests/cli/test_ssapp.py::test_a_crash_twice_before_an_rmw). `check`
// recovers and requires each word to equal its count: a lost increment shows
// as word < count, a doubled one as word > count.
//
//   rmw_twice run POOL N    create POOL (or resume it) and run to N FASEs
//   rmw_twice check POOL    recover, verify
#include <pmkit/pmkit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct root {
  uint64_t word[2]; // updated only by compare-and-swap
  uint64_t done[2];
};

// Two FASEs, not one with an index: each has its own frame.
#define BUMP(i)                                                                \
  PMKIT_FASE void bump##i(struct root *r) {                                    \
    uint64_t old = r->word[i];                                                 \
    while (!__atomic_compare_exchange_n(&r->word[i], &old, old + 1, 0,         \
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))   \
      ;                                                                        \
    r->done[i]++;                                                              \
  }
BUMP(0)
BUMP(1)

int main(int argc, char **argv) {
  if (argc < 3)
    return 2;
  int run = !strcmp(argv[1], "run");
  FILE *f = fopen(argv[2], "r");
  pmkit_pool *p;
  struct root *r;
  int err = f ? pmkit_pool_open(argv[2], NULL, &p)
              : pmkit_pool_create(argv[2], PMKIT_POOL_MIN_SIZE, NULL, &p);
  if (f)
    fclose(f);
  if (err || pmkit_root(p, sizeof *r, (void **)&r))
    return 2;
  int n = pmkit_recover(p);
  if (n < 0)
    return 2;
  if (!run) {
    for (int i = 0; i < 2; i++) {
      uint64_t w = pmkit_ssapp_value(r->word[i]);
      if (w != r->done[i]) {
        printf("word %d: %llu after %llu increments\n", i,
               (unsigned long long)w, (unsigned long long)r->done[i]);
        return 1;
      }
    }
    printf("ok: %llu+%llu increments (%d recovered)\n",
           (unsigned long long)r->done[0], (unsigned long long)r->done[1], n);
    return 0;
  }
  uint64_t want = strtoull(argv[3], NULL, 10);
  while (r->done[0] + r->done[1] < want)
    if (r->done[0] > r->done[1])
      bump1(r);
    else
      bump0(r);
  pmkit_pool_close(p);
  return 0;
}
