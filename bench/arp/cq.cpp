// SPDX-License-Identifier: Apache-2.0
//
// cq.cpp -- concurrent queue (the paper's "cq", after Pelley et al.): a
// ring of 64-byte entries in PM with a head and a tail, under one
// persistent lock. An enqueue writes its entry, then (sequence point)
// advances the tail; a dequeue advances the head. The lock's persistent
// release orders a critical section's persists before the next holder's.
// Invariant: every entry in [head, tail) is whole.

#include "driver.hpp"

using namespace arpb;

namespace {

struct Entry {
  uint64_t val[7];
  uint64_t check;
};

struct Data {
  uint64_t cap;
  uint64_t head;
  uint64_t pad0[6];
  uint64_t tail;
  uint64_t pad1[7];
  Entry e[];
};

uint64_t sum(const Entry &e) { return mixAll(0x1234, e.val); }

class Queue : public Workload {
  Data *d = nullptr;
  SpinLock lock;

public:
  const char *name() const override { return "cq"; }
  void *create(pmkit_pool *pool, double scale, uint64_t, Rng &) override {
    uint64_t cap = sized(1024, scale);
    d = (Data *)palloc(pool, sizeof(Data) + cap * sizeof(Entry));
    d->cap = cap;
    for (uint64_t i = 0; i < cap / 2; i++) { // start half full
      Entry &e = d->e[i];
      for (unsigned k = 0; k < 7; k++)
        e.val[k] = mix(i * 7 + k);
      e.check = sum(e);
    }
    d->tail = cap / 2;
    pmkit_persist(d, sizeof(Data) + cap * sizeof(Entry));
    return d;
  }
  void attach(void *p) override { d = (Data *)p; }
  Task task(Rng &r) override { return Task{r.below(2), r.next(), 0}; }
  void run(unsigned, const Task &t, Tx &) override {
    lock.lock(persistent_sync);
    if (t.a == 0 && d->tail - d->head < d->cap) {
      Entry &e = d->e[d->tail % d->cap];
      for (unsigned k = 0; k < 7; k++)
        e.val[k] = t.b + k;
      e.check = sum(e);
      pmkit::sequence_point();
      d->tail = d->tail + 1;
    } else if (t.a == 1 && d->head != d->tail) {
      d->head = d->head + 1;
    }
    lock.unlock(persistent_sync);
  }
  std::string check() override {
    if (d->tail - d->head > d->cap)
      return "head " + std::to_string(d->head) + " and tail " +
             std::to_string(d->tail) + " are more than the ring apart";
    for (uint64_t i = d->head; i != d->tail; i++)
      if (sum(d->e[i % d->cap]) != d->e[i % d->cap].check)
        return "entry " + std::to_string(i) + " in the queue is torn";
    return "";
  }
};

} // namespace

ARP_WORKLOAD(Queue);
