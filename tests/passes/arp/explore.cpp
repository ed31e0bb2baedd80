// SPDX-License-Identifier: Apache-2.0
// End to end, the x86 lowering against the explorer's x86 model. Thread A
// appends to a log (each entry, a sequence point, then the count) and
// publishes a record with a persistent release; thread B acquires it and
// writes a receipt. Built with --mode=arp every crash image is consistent:
// no count covers a lost entry, no receipt outlives the record. The
// must-fail halves: built without the pass (nothing is written back) and,
// with the pass, publishing through a volatile release (no fence orders
// the record before the receipt), the explorer finds an inconsistent image.
// The explorer's arp model checks the program itself, built without the
// pass: consistent as written, inconsistent with the volatile publish.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-mode=arp -mllvm -pmkit-trace \
// RUN:   %s %link_trace -lstdc++ -o %t.arp
// RUN: %explore --no-progress --save-dir %t.d/arp \
// RUN:   --check '%t.arp check {pool}' -- %t.arp run %t.d/a.pool \
// RUN:   | %FileCheck %s --check-prefix=OK
// OK: note: the trace holds {{[0-9]+}} acquires, releases and sequence points
// OK: result: ok (exhaustive) (as this build orders writes, not under ARP): every crash image
//
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-trace %s %link_trace -lstdc++ \
// RUN:   -o %t.plain
// RUN: %not %explore --stop-after 1 --no-progress --save-dir %t.d/plain \
// RUN:   --check '%t.plain check {pool}' -- %t.plain run %t.d/p.pool \
// RUN:   | %FileCheck %s --check-prefix=BAD
// BAD: result: FAILED
//
// RUN: %explore --model arp --no-progress --save-dir %t.d/arpmodel \
// RUN:   --check '%t.plain check {pool}' -- %t.plain run %t.d/m.pool \
// RUN:   | %FileCheck %s --check-prefix=OKARP
// (the arp model samples each crash point's candidate images)
// OKARP-NOT: note:
// OKARP: result: no failure in {{[0-9]+}} sampled images (not a proof):
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-trace -DVOLATILE_PUBLISH %s \
// RUN:   %link_trace -lstdc++ -o %t.plainvol
// RUN: %not %explore --stop-after 1 --model arp --no-progress --save-dir %t.d/arpvol \
// RUN:   --check '%t.plainvol check {pool}' -- %t.plainvol run %t.d/mv.pool \
// RUN:   | %FileCheck %s --check-prefix=BAD
//
// RUN: %clang_pm -x c++ -O1 -g -mllvm -pmkit-mode=arp -mllvm -pmkit-trace \
// RUN:   -DVOLATILE_PUBLISH %s %link_trace -lstdc++ -o %t.vol
// RUN: %not %explore --stop-after 1 --no-progress --save-dir %t.d/vol \
// RUN:   --check '%t.vol check {pool}' -- %t.vol run %t.d/v.pool \
// RUN:   | %FileCheck %s --check-prefix=BAD

#include <pmkit/arp.hpp>
#include <pmkit/pmkit.h>

#include <cstdio>
#include <cstring>
#include <thread>

#ifdef VOLATILE_PUBLISH
#define PUBLISH pmkit::volatile_sync
#else
#define PUBLISH pmkit::persistent_sync
#endif

constexpr unsigned long N = 4;

struct Root {
  unsigned long count;
  unsigned long pad0[7];
  unsigned long entry[N][8]; // a line each
  unsigned long record;
  unsigned long pad1[7];
  unsigned long receipt;
  unsigned long pad2[7];
  pmkit::atomic<unsigned long> ready; // in the pool too
};

static unsigned long value(unsigned long i) { return 1000 + 7 * i; }

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
      while (!r->ready.load(std::memory_order_acquire))
        ;
      r->receipt = r->record + 1;
    });
    for (unsigned long i = 0; i < N; i++) {
      r->entry[i][0] = value(i);
      pmkit::sequence_point();
      r->count = i + 1;
    }
    r->record = 42;
    r->ready.store(1, std::memory_order_release, PUBLISH);
    b.join();
  } else {
    for (unsigned long i = 0; i < r->count && i < N; i++)
      if (r->entry[i][0] != value(i)) {
        printf("entry %lu is missing\n", i);
        return 1;
      }
    if (r->receipt && r->record != 42) {
      printf("a receipt for a record that is lost\n");
      return 1;
    }
  }
  pmkit_pool_close(p);
  return 0;
}
