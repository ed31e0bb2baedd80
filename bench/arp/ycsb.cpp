// SPDX-License-Identifier: Apache-2.0
//
// ycsb.cpp -- YCSB workload A (the paper's "YCSB_A") on a key-value store
// in PM, with YCSB's default record: 10 fields of 100 bytes. Half the
// operations read a record (all its fields), half update one field; 80% of
// them go to a hot 20% of the 10000 * scale records. Each field has two
// slots and a bit in the record's selector: an update writes the idle slot,
// then (sequence point) flips the bit, under the record's persistent lock
// (readers take it too). Invariant: every field's selected slot is whole
// and belongs to its record.

#include "driver.hpp"

#include <vector>

using namespace arpb;

namespace {

constexpr unsigned FIELDS = 10;

struct Field {
  uint64_t w[12]; // 96 bytes of value (YCSB's 100, to the word)
  uint64_t check;
};

struct Record {
  uint64_t key, sel; // sel: bit f set = field f's slot 1 is current
  uint64_t pad[6];
  Field f[FIELDS][2];
};

struct Data {
  uint64_t n;
  uint64_t pad[7];
  Record r[];
};

uint64_t sum(const Field &x, uint64_t key, unsigned f) {
  return mixAll(mix(key * FIELDS + f), x.w);
}

class Ycsb : public Workload {
  Data *d = nullptr;
  std::vector<SpinLock> locks{4096};

public:
  const char *name() const override { return "ycsb"; }
  void *create(pmkit_pool *pool, double scale, uint64_t, Rng &r) override {
    uint64_t n = sized(10000, scale);
    d = (Data *)palloc(pool, sizeof(Data) + n * sizeof(Record));
    d->n = n;
    for (uint64_t i = 0; i < n; i++) {
      Record &rec = d->r[i];
      rec.key = i;
      for (unsigned f = 0; f < FIELDS; f++) {
        for (uint64_t &v : rec.f[f][0].w)
          v = r.next();
        rec.f[f][0].check = sum(rec.f[f][0], i, f);
      }
    }
    pmkit_persist(d, sizeof(Data) + n * sizeof(Record));
    return d;
  }
  void attach(void *p) override { d = (Data *)p; }
  Task task(Rng &r) override {
    uint64_t hot = d->n / 5;
    uint64_t key = r.below(10) < 8 ? r.below(hot) : hot + r.below(d->n - hot);
    // b: 0 read, else 1 + the field to update
    return Task{key, r.below(2) ? 1 + r.below(FIELDS) : 0, r.next()};
  }
  void run(unsigned, const Task &t, Tx &) override {
    Record &rec = d->r[t.a];
    SpinLock &l = locks[t.a % locks.size()];
    l.lock(persistent_sync);
    if (t.b == 0) { // read every field
      uint64_t acc = 0;
      for (unsigned f = 0; f < FIELDS; f++)
        acc ^= rec.f[f][(rec.sel >> f) & 1].w[t.c % 12];
      volatile uint64_t sink = acc;
      (void)sink;
    } else {
      unsigned f = (unsigned)(t.b - 1);
      Field &x = rec.f[f][((rec.sel >> f) & 1) ^ 1];
      for (unsigned k = 0; k < 12; k++)
        x.w[k] = t.c + k;
      x.check = sum(x, t.a, f);
      pmkit::sequence_point();
      rec.sel = rec.sel ^ (1ull << f);
    }
    l.unlock(persistent_sync);
  }
  std::string check() override {
    for (uint64_t i = 0; i < d->n; i++) {
      const Record &rec = d->r[i];
      for (unsigned f = 0; f < FIELDS; f++)
        if (rec.f[f][(rec.sel >> f) & 1].check !=
            sum(rec.f[f][(rec.sel >> f) & 1], i, f))
          return "field " + std::to_string(f) + " of record " +
                 std::to_string(i) + " is torn";
    }
    return "";
  }
};

} // namespace

ARP_WORKLOAD(Ycsb);
