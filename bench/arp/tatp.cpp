// SPDX-License-Identifier: Apache-2.0
//
// tatp.cpp -- TATP's update-location transaction (the paper's "TATP"): set
// a random subscriber's VLR location. Each record is a cache line in PM
// holding the location and a checksum of (subscriber, location); the
// update is failure-atomic with the worker's undo log, under the record's
// persistent lock: many small critical sections, each with the three
// sequence points of its log. Invariant: every record's checksum matches.

#include "driver.hpp"

#include <vector>

using namespace arpb;

namespace {

struct Subscriber {
  uint64_t id, location, check;
  uint64_t bits[5]; // the rest of the row (bit and hex fields)
};

struct Data {
  uint64_t n;
  uint64_t pad[7];
  Subscriber s[];
};

class Tatp : public Workload {
  Data *d = nullptr;
  std::vector<SpinLock> locks{4096};

public:
  const char *name() const override { return "tatp"; }
  void *create(pmkit_pool *pool, double scale, uint64_t, Rng &r) override {
    uint64_t n = sized(100000, scale);
    d = (Data *)palloc(pool, sizeof(Data) + n * sizeof(Subscriber));
    d->n = n;
    for (uint64_t i = 0; i < n; i++) {
      Subscriber &s = d->s[i];
      s.id = i;
      s.location = r.next() & 0xffffffff;
      s.check = mix(s.id ^ mix(s.location));
      for (uint64_t &b : s.bits)
        b = r.next();
    }
    pmkit_persist(d, sizeof(Data) + n * sizeof(Subscriber));
    return d;
  }
  void attach(void *p) override { d = (Data *)p; }
  Task task(Rng &r) override {
    return Task{r.below(d->n), r.next() & 0xffffffff, 0};
  }
  void run(unsigned, const Task &t, Tx &tx) override {
    Subscriber &s = d->s[t.a];
    SpinLock &l = locks[t.a % locks.size()];
    l.lock(persistent_sync);
    tx.add(&s.location);
    tx.add(&s.check);
    tx.arm();
    s.location = t.b;
    s.check = mix(s.id ^ mix(t.b));
    tx.commit();
    l.unlock(persistent_sync);
  }
  std::string check() override {
    for (uint64_t i = 0; i < d->n; i++)
      if (d->s[i].check != mix(d->s[i].id ^ mix(d->s[i].location)))
        return "subscriber " + std::to_string(i) + " is torn";
    return "";
  }
};

} // namespace

ARP_WORKLOAD(Tatp);
