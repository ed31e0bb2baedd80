// SPDX-License-Identifier: Apache-2.0
//
// pc.cpp -- persistent cache (the paper's "pc"): a chained hash table in
// PM whose puts are copy-on-write. A put fills a fresh node (key, value,
// next, checksum) from an arena with a node for every task, then (sequence
// point) links it at the head of its bucket; chains are cut after 4 nodes, so a
// newer value shadows older ones. One persistent lock per 64 buckets.
// Invariant: every reachable node is whole and in its key's bucket.

#include "driver.hpp"

#include <atomic>
#include <vector>

using namespace arpb;

namespace {

constexpr unsigned DEPTH = 4;

struct Node {
  uint64_t key;
  uint64_t val[5];
  Node *next;
  uint64_t check;
};

struct Data {
  uint64_t buckets, nodes;
  Node *arena;
  Node *head[];
};

uint64_t sum(const Node &n) { return mixAll(mix(n.key), n.val); }

class Cache : public Workload {
  Data *d = nullptr;
  std::vector<SpinLock> locks{1024};
  std::atomic<uint64_t> used{0}; // DRAM: a crash leaks unlinked nodes

public:
  const char *name() const override { return "pc"; }
  void *create(pmkit_pool *pool, double scale, uint64_t ops, Rng &) override {
    uint64_t buckets = sized(16384, scale);
    d = (Data *)palloc(pool, sizeof(Data) + buckets * sizeof(Node *));
    d->buckets = buckets;
    d->nodes = ops + 1;
    d->arena = (Node *)palloc(pool, d->nodes * sizeof(Node));
    pmkit_persist(d, sizeof(Data));
    return d;
  }
  void attach(void *p) override { d = (Data *)p; }
  Task task(Rng &r) override {
    return Task{r.below(4 * d->buckets), r.next(), 0};
  }
  void run(unsigned, const Task &t, Tx &) override {
    uint64_t b = mix(t.a) % d->buckets;
    Node *n =
        &d->arena[used.fetch_add(1, std::memory_order_relaxed) % d->nodes];
    SpinLock &l = locks[(b / 64) % locks.size()];
    l.lock(persistent_sync);
    n->key = t.a;
    for (unsigned k = 0; k < 5; k++)
      n->val[k] = t.b ^ k;
    n->next = d->head[b];
    n->check = sum(*n);
    pmkit::sequence_point();
    d->head[b] = n;
    Node *c = n;
    for (unsigned k = 1; c && k < DEPTH; k++)
      c = c->next;
    if (c && c->next)
      c->next = nullptr; // a single 8-byte store: the chain stays whole
    l.unlock(persistent_sync);
  }
  std::string check() override {
    for (uint64_t b = 0; b < d->buckets; b++)
      for (Node *n = d->head[b]; n; n = n->next) {
        if (sum(*n) != n->check)
          return "a node of bucket " + std::to_string(b) + " is torn";
        if (mix(n->key) % d->buckets != b)
          return "a node in bucket " + std::to_string(b) + " has key " +
                 std::to_string(n->key);
      }
    return "";
  }
};

} // namespace

ARP_WORKLOAD(Cache);
