// SPDX-License-Identifier: Apache-2.0
// End to end, the oracle of robust mode: a program written with no flushes
// or fences, built with --mode=robust, has no crash image under the x86-line
// model that its checker rejects, and none that strict persistency could
// not produce (pmkit explore --robustness). Built without the pass, the
// same source fails both (the must-fail half): the count of the log can
// persist before the entries it counts.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-trace \
// RUN:   -mllvm -pmkit-trace-loads %s %link_trace -o %t.robust
// RUN: %explore --model x86-line --robustness --no-progress --save-dir %t.d/robust \
// RUN:   --check '%t.robust check {pool}' -- %t.robust run %t.d/r.pool \
// RUN:   | %FileCheck %s --check-prefix=ROBUST
// ROBUST: robustness: 0 of {{[0-9]+}} crash images
// ROBUST: result: ok (exhaustive): every crash image
//
// RUN: %clang_pm -O1 -g -mllvm -pmkit-trace -mllvm -pmkit-trace-loads %s \
// RUN:   %link_trace -o %t.plain
// RUN: %not %explore --stop-after 1 --model x86-line --robustness --no-progress --save-dir %t.d/plain \
// RUN:   --check '%t.plain check {pool}' -- %t.plain run %t.d/p.pool \
// RUN:   | %FileCheck %s --check-prefix=PLAIN
// PLAIN: robustness: {{[1-9][0-9]*}} of {{[0-9]+}} crash images
// PLAIN: explore.c:[[@LINE+30]]{{.*}}can be lost while the later store at {{.*}}explore.c:[[@LINE+31]]
// PLAIN: result: FAILED

#include <pmkit/pmkit.h>
#include <stdio.h>
#include <string.h>

#define N 6

struct log {
  unsigned long count;
  unsigned long pad[7];
  unsigned long entry[N][8]; // a line each
};

static unsigned long value(unsigned long i) { return 1000 + 7 * i; }

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  pmkit_pool *p;
  struct log *l;
  int create = !strcmp(argv[1], "run");
  int err = create ? pmkit_pool_create(argv[2], 8 << 20, NULL, &p)
                   : pmkit_pool_open(argv[2], NULL, &p);
  if (err || pmkit_root(p, sizeof *l, (void **)&l))
    return 2;
  if (create) {
    pmkit_mark_begin("append");
    for (unsigned long i = 0; i < N; i++) {
      l->entry[i][0] = value(i);
      l->count = i + 1;
    }
    pmkit_mark_end("append");
  } else {
    for (unsigned long i = 0; i < l->count && i < N; i++)
      if (l->entry[i][0] != value(i)) {
        printf("entry %lu is missing\n", i);
        return 1;
      }
  }
  pmkit_pool_close(p);
  return 0;
}
