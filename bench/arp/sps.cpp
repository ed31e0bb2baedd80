// SPDX-License-Identifier: Apache-2.0
//
// sps.cpp -- array swaps (the paper's "sps", after NV-Heaps): random pairs
// of elements of a PM array swap places, each swap failure-atomic with the
// worker's undo log, under the persistent locks of both elements (taken in
// address order). Invariant: the array still holds the initial multiset
// of values (its sum and the sum of their mixes).

#include "driver.hpp"

#include <utility>
#include <vector>

using namespace arpb;

namespace {

struct Data {
  uint64_t n, sum, mixSum;
  uint64_t pad[5];
  uint64_t a[];
};

class Swaps : public Workload {
  Data *d = nullptr;
  std::vector<SpinLock> locks{4096};

public:
  const char *name() const override { return "sps"; }
  void *create(pmkit_pool *pool, double scale, uint64_t, Rng &r) override {
    uint64_t n = sized(65536, scale);
    d = (Data *)palloc(pool, sizeof(Data) + n * 8);
    d->n = n;
    for (uint64_t i = 0; i < n; i++) {
      d->a[i] = r.next();
      d->sum += d->a[i];
      d->mixSum += mix(d->a[i]);
    }
    pmkit_persist(d, sizeof(Data) + n * 8);
    return d;
  }
  void attach(void *p) override { d = (Data *)p; }
  Task task(Rng &r) override {
    uint64_t i = r.below(d->n), j = r.below(d->n - 1);
    return Task{i, j >= i ? j + 1 : j, 0};
  }
  void run(unsigned, const Task &t, Tx &tx) override {
    size_t li = t.a % locks.size(), lj = t.b % locks.size();
    if (li > lj)
      std::swap(li, lj);
    locks[li].lock(persistent_sync);
    if (lj != li)
      locks[lj].lock(persistent_sync);
    tx.add(&d->a[t.a]);
    tx.add(&d->a[t.b]);
    tx.arm();
    std::swap(d->a[t.a], d->a[t.b]);
    tx.commit();
    if (lj != li)
      locks[lj].unlock(persistent_sync);
    locks[li].unlock(persistent_sync);
  }
  std::string check() override {
    uint64_t s = 0, m = 0;
    for (uint64_t i = 0; i < d->n; i++)
      s += d->a[i], m += mix(d->a[i]);
    if (s != d->sum || m != d->mixSum)
      return "the array no longer holds its initial values";
    return "";
  }
};

} // namespace

ARP_WORKLOAD(Swaps);
