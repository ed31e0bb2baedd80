// SPDX-License-Identifier: Apache-2.0
//
// ycsb.cpp -- YCSB workload A (the paper's "YCSB_A") on a key-value store
// in PM: 50% reads, 50% updates of 100000 * scale records, 80% of the
// operations on a hot 20% of the keys. A record has two value slots and a
// selector; an update writes the idle slot, then (sequence point) flips
// the selector, under the record's persistent lock (readers take it too).
// Invariant: every record's selected slot is whole and holds its key.

#include "driver.hpp"

#include <vector>

using namespace arpb;

namespace {

struct Slot {
  uint64_t key, version, val[5], check;
};

struct Record {
  uint64_t sel;
  uint64_t pad[7];
  Slot slot[2];
};

struct Data {
  uint64_t n;
  uint64_t pad[7];
  Record r[];
};

uint64_t sum(const Slot &s) {
  return mixAll(mix(s.key ^ mix(s.version)), s.val);
}

class Ycsb : public Workload {
  Data *d = nullptr;
  std::vector<SpinLock> locks{4096};

public:
  const char *name() const override { return "ycsb"; }
  void *create(pmkit_pool *pool, double scale, uint64_t, Rng &r) override {
    uint64_t n = sized(100000, scale);
    d = (Data *)palloc(pool, sizeof(Data) + n * sizeof(Record));
    d->n = n;
    for (uint64_t i = 0; i < n; i++) {
      Slot &s = d->r[i].slot[0];
      s.key = i;
      for (uint64_t &v : s.val)
        v = r.next();
      s.check = sum(s);
    }
    pmkit_persist(d, sizeof(Data) + n * sizeof(Record));
    return d;
  }
  void attach(void *p) override { d = (Data *)p; }
  Task task(Rng &r) override {
    uint64_t hot = d->n / 5;
    uint64_t key = r.below(10) < 8 ? r.below(hot) : hot + r.below(d->n - hot);
    return Task{key, r.below(2), r.next()};
  }
  void run(unsigned, const Task &t, Tx &) override {
    Record &rec = d->r[t.a];
    SpinLock &l = locks[t.a % locks.size()];
    l.lock(persistent_sync);
    if (t.b == 0) { // read
      const Slot &s = rec.slot[rec.sel & 1];
      volatile uint64_t sink = s.val[t.c % 5];
      (void)sink;
    } else {
      const Slot &cur = rec.slot[rec.sel & 1];
      Slot &s = rec.slot[(rec.sel & 1) ^ 1];
      s.key = t.a;
      s.version = cur.version + 1;
      for (unsigned k = 0; k < 5; k++)
        s.val[k] = t.c + k;
      s.check = sum(s);
      pmkit::sequence_point();
      rec.sel = rec.sel ^ 1;
    }
    l.unlock(persistent_sync);
  }
  std::string check() override {
    for (uint64_t i = 0; i < d->n; i++) {
      const Slot &s = d->r[i].slot[d->r[i].sel & 1];
      if (s.check != sum(s) || s.key != i)
        return "record " + std::to_string(i) + " is torn";
    }
    return "";
  }
};

} // namespace

ARP_WORKLOAD(Ycsb);
