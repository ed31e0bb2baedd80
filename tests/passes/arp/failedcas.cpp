// SPDX-License-Identifier: Apache-2.0
// A compare-exchange that fails after recording its release. A writes its
// data and publishes a flag with a persistent release; B's compare-exchange
// on the flag fails; C then acquires the flag, reading A's release, and
// writes a receipt. The receipt is ordered after A's data, so every crash
// image is consistent under the arp model. A reader that took B's failed
// release for the last one would order the receipt after B's writes only
// and report an image with the receipt but not the data.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-trace %s %link_trace -lstdc++ \
// RUN:   -o %t
// RUN: %explore --model arp --no-progress --save-dir %t.d/f \
// RUN:   --check '%t check {pool}' -- %t run %t.d/p.pool | %FileCheck %s
// CHECK: result: no failure in {{[0-9]+}} sampled images (not a proof)

#include <pmkit/arp.hpp>
#include <pmkit/pmkit.h>

#include <cstdio>
#include <cstring>
#include <thread>

struct Root {
  unsigned long data;
  unsigned long pad0[7];
  unsigned long receipt;
  unsigned long pad1[7];
};

static pmkit::atomic<int> flag{0}; // in DRAM: its order is what counts
static pmkit::atomic<int> step{0}; // sequences the threads, orders nothing

static void waitFor(int s) {
  while (step.load(std::memory_order_acquire, pmkit::volatile_sync) != s)
    ;
}

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  pmkit_pool *p;
  Root *r;
  bool create = !strcmp(argv[1], "run");
  int err = create ? pmkit_pool_create(argv[2], 8 << 20, nullptr, &p)
                   : pmkit_pool_open(argv[2], nullptr, &p);
  if (err || pmkit_root(p, sizeof *r, (void **)&r))
    return 2;
  if (create) {
    std::thread b([] {
      waitFor(1);
      int e = 5;
      if (flag.compare_exchange_strong(e, 7)) // fails: the flag is 1
        return;
      step.store(2, std::memory_order_release, pmkit::volatile_sync);
    });
    std::thread c([r] {
      waitFor(2);
      if (flag.load(std::memory_order_acquire) == 1)
        r->receipt = 1;
    });
    r->data = 42;
    flag.store(1, std::memory_order_release);
    step.store(1, std::memory_order_release, pmkit::volatile_sync);
    b.join();
    c.join();
  } else if (r->receipt && r->data != 42) {
    printf("a receipt without the data\n");
    return 1;
  }
  pmkit_pool_close(p);
  return 0;
}
