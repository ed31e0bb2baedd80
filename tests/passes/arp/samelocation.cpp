// SPDX-License-Identifier: Apache-2.0
// The explorer's arp model on a location two threads write. Thread A writes
// its data, a sequence point, then a flag; it hands over to B through a
// volatile release, and B overwrites the flag. Nothing orders B's write
// after A's data, so ARP allows a crash image with B's flag and no data:
// a program that reads the flag as "the data is there" is wrong, and the
// model must say so. With a persistent hand-off B's flag is ordered after
// the data and every image is consistent.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-trace %s %link_trace -lstdc++ \
// RUN:   -o %t.vol
// RUN: %not %explore --stop-after 1 --model arp --no-progress --save-dir %t.d/vol \
// RUN:   --check '%t.vol check {pool}' -- %t.vol run %t.d/v.pool \
// RUN:   | %FileCheck %s --check-prefix=BAD
// BAD: result: FAILED
//
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-trace -DPERSISTENT_HANDOFF %s \
// RUN:   %link_trace -lstdc++ -o %t.per
// RUN: %explore --model arp --no-progress --save-dir %t.d/per \
// RUN:   --check '%t.per check {pool}' -- %t.per run %t.d/p.pool \
// RUN:   | %FileCheck %s --check-prefix=OK
// OK: result: no failure in {{[0-9]+}} sampled images (not a proof)

#include <pmkit/arp.hpp>
#include <pmkit/pmkit.h>

#include <cstdio>
#include <cstring>
#include <thread>

#ifdef PERSISTENT_HANDOFF
#define HANDOFF pmkit::persistent_sync
#else
#define HANDOFF pmkit::volatile_sync
#endif

struct Root {
  unsigned long data;
  unsigned long pad0[7];
  unsigned long flag; // 0: nothing; else the data is there
  unsigned long pad1[7];
};

static pmkit::atomic<int> turn{0}; // in DRAM

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
    std::thread b([r] {
      while (!turn.load(std::memory_order_acquire, HANDOFF))
        ;
      r->flag = 2;
    });
    r->data = 42;
    pmkit::sequence_point();
    r->flag = 1;
    turn.store(1, std::memory_order_release, HANDOFF);
    b.join();
  } else if (r->flag && r->data != 42) {
    printf("flag %lu without the data\n", r->flag);
    return 1;
  }
  pmkit_pool_close(p);
  return 0;
}
