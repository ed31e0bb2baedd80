// SPDX-License-Identifier: Apache-2.0
// End to end, an exception leaving a function with a write pending: the
// destructor of a guard stores to PM while an exception unwinds out of
// step(), and main's handler then stores a second location. Built with
// robust mode (opt and flit) the explorer finds no image where the second
// store persisted and the first did not; built without it, it does. step()
// stays out of line, so that main relies on its summary: before robust
// mode treated an exception leaving a function as an exit, the handler's
// store was not ordered after the guard's, and the first half failed.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-mode=robust -mllvm \
// RUN:   -pmkit-robust-setting=opt -mllvm -pmkit-trace -mllvm \
// RUN:   -pmkit-trace-loads %s %link_trace -lstdc++ -o %t.opt
// RUN: %explore --model x86-line --robustness --no-progress --save-dir %t.d/opt \
// RUN:   --check '%t.opt check {pool}' -- %t.opt run %t.d/o.pool \
// RUN:   | %FileCheck %s --check-prefix=ROBUST
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-mode=robust -mllvm \
// RUN:   -pmkit-robust-setting=flit -mllvm -pmkit-trace -mllvm \
// RUN:   -pmkit-trace-loads %s %link_trace -lstdc++ -o %t.flit
// RUN: %explore --model x86-line --robustness --no-progress --save-dir %t.d/flit \
// RUN:   --check '%t.flit check {pool}' -- %t.flit run %t.d/f.pool \
// RUN:   | %FileCheck %s --check-prefix=ROBUST
// ROBUST: robustness: 0 of {{[0-9]+}} crash images
// ROBUST: result: ok (exhaustive): every crash image
//
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-trace -mllvm -pmkit-trace-loads \
// RUN:   %s %link_trace -lstdc++ -o %t.plain
// RUN: %not %explore --stop-after 1 --model x86-line --robustness --no-progress --save-dir %t.d/plain \
// RUN:   --check '%t.plain check {pool}' -- %t.plain run %t.d/p.pool \
// RUN:   | %FileCheck %s --check-prefix=PLAIN
// PLAIN: robustness: {{[1-9][0-9]*}} of {{[0-9]+}} crash images
// PLAIN: result: FAILED

#include <cstdio>
#include <cstring>
#include <pmkit/pmkit.h>
#include <stdexcept>

struct rec {
  unsigned long done;    // the guard's mark
  unsigned long pad[7];  // (another line)
  unsigned long handled; // set by the handler, after the mark
};

struct Guard {
  unsigned long *slot;
  ~Guard() { *slot = 1; }
};

__attribute__((noinline)) void fail(int x) {
  if (x)
    throw std::runtime_error("step failed");
}

__attribute__((noinline)) void step(rec *r, int x) {
  Guard g{&r->done};
  fail(x);
}

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  pmkit_pool *p;
  rec *r;
  bool create = !strcmp(argv[1], "run");
  int err = create ? pmkit_pool_create(argv[2], 8 << 20, NULL, &p)
                   : pmkit_pool_open(argv[2], NULL, &p);
  if (err || pmkit_root(p, sizeof *r, (void **)&r))
    return 2;
  if (create) {
    pmkit_mark_begin("step");
    try {
      step(r, argc);
    } catch (const std::exception &) {
      r->handled = 1;
    }
    pmkit_mark_end("step");
  } else if (r->handled && !r->done) {
    std::printf("handled without the guard's mark\n");
    return 1;
  }
  pmkit_pool_close(p);
  return 0;
}
