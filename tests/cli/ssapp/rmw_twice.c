// SPDX-License-Identifier: Apache-2.0
// One FASE after another, each an atomic compare-and-swap increment of the same
// word and a count of FASEs done, with no other RMW between them: the shape in
// which SSAPP recovery once took an RMW attempt two executions old for the
// interrupted one (tests/cli/test_ssapp.py::test_a_crash_twice_before_an_rmw).
// `check` recovers and requires the word to equal the count: a lost increment
// shows as word < count, a doubled one as word > count.
//
//   rmw_twice run POOL N    create POOL (or resume it) and run to N FASEs
//   rmw_twice check POOL    recover, verify
#include <pmkit/pmkit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct root {
  uint64_t word; // updated only by compare-and-swap
  uint64_t done;
};

PMKIT_FASE void bump(struct root *r) {
  uint64_t old = r->word;
  while (!__atomic_compare_exchange_n(&r->word, &old, old + 1, 0,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    ;
  r->done++;
}

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
  uint64_t w = pmkit_ssapp_value(r->word);
  if (!run) {
    if (w != r->done) {
      printf("word %llu after %llu increments\n", (unsigned long long)w,
             (unsigned long long)r->done);
      return 1;
    }
    printf("ok: %llu increments (%d recovered)\n", (unsigned long long)r->done,
           n);
    return 0;
  }
  uint64_t want = strtoull(argv[3], NULL, 10);
  while (r->done < want)
    bump(r);
  pmkit_pool_close(p);
  return 0;
}
