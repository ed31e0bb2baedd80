// SPDX-License-Identifier: Apache-2.0
//
// tpcc.cpp -- TPC-C's new-order transaction (the paper's "TPCC") on one
// warehouse: 10 districts, 10000 * scale items with their stock rows. A
// transaction orders 5-15 distinct items: under its district's lock and
// its items' stock locks (persistent, taken in order) it writes the order
// and its lines to a fresh slot, then with the worker's undo log updates
// every stock row and advances the district (next order id, last order).
// Invariant: each district's orders are whole and numbered without gaps,
// and the stock rows account for exactly the committed order lines.

#include "driver.hpp"

#include <algorithm>
#include <atomic>
#include <vector>

using namespace arpb;

namespace {

constexpr unsigned DISTRICTS = 10, MAXLINES = 15;

struct Order {
  uint64_t district, id, customer, lines;
  Order *prev;
  uint64_t check;
  uint64_t pad[2];
  struct {
    uint64_t item, qty;
  } line[MAXLINES];
  uint64_t pad2[2];
};

struct District {
  uint64_t nextId;
  Order *last;
  uint64_t pad[6];
};

struct Stock {
  uint64_t qty, ytd, orders;
  uint64_t pad[5];
};

struct Data {
  uint64_t items, slots;
  Order *orders;
  uint64_t pad[5];
  District district[DISTRICTS];
  Stock stock[];
};

uint64_t sum(const Order &o) {
  uint64_t h = mix(o.district ^ mix(o.id ^ mix(o.customer ^ mix(o.lines))));
  for (uint64_t i = 0; i < o.lines && i < MAXLINES; i++)
    h = mix(h ^ o.line[i].item ^ (o.line[i].qty << 40));
  return h;
}

class Tpcc : public Workload {
  Data *d = nullptr;
  std::vector<SpinLock> districtLock{DISTRICTS};
  std::vector<SpinLock> stockLock{1024};
  std::atomic<uint64_t> used{0}; // DRAM: a crash leaks an unlinked slot

public:
  const char *name() const override { return "tpcc"; }
  void *create(pmkit_pool *pool, double scale, uint64_t ops, Rng &r) override {
    uint64_t items = sized(10000, scale);
    d = (Data *)palloc(pool, sizeof(Data) + items * sizeof(Stock));
    d->items = items;
    d->slots = ops + 1;
    d->orders = (Order *)palloc(pool, d->slots * sizeof(Order));
    for (uint64_t i = 0; i < items; i++)
      d->stock[i].qty = 10 + r.below(91);
    pmkit_persist(d, sizeof(Data) + items * sizeof(Stock));
    return d;
  }
  void attach(void *p) override { d = (Data *)p; }
  Task task(Rng &r) override {
    return Task{r.below(DISTRICTS) | (5 + r.below(11)) << 8, r.next(),
                r.below(3000)};
  }
  void run(unsigned, const Task &t, Tx &tx) override {
    uint64_t dist = t.a & 0xff, lines = t.a >> 8;
    Rng r(t.b);
    std::vector<uint64_t> items;
    while (items.size() < lines) {
      uint64_t it = r.below(d->items);
      if (std::find(items.begin(), items.end(), it) == items.end())
        items.push_back(it);
    }
    std::vector<size_t> locks;
    for (uint64_t it : items)
      locks.push_back(it % stockLock.size());
    std::sort(locks.begin(), locks.end());
    locks.erase(std::unique(locks.begin(), locks.end()), locks.end());
    District &ds = d->district[dist];
    districtLock[dist].lock(persistent_sync);
    for (size_t l : locks)
      stockLock[l].lock(persistent_sync);
    Order &o =
        d->orders[used.fetch_add(1, std::memory_order_relaxed) % d->slots];
    o.district = dist;
    o.id = ds.nextId;
    o.customer = t.c;
    o.lines = lines;
    o.prev = ds.last;
    for (uint64_t i = 0; i < lines; i++)
      o.line[i].item = items[i], o.line[i].qty = 1 + r.below(10);
    o.check = sum(o);
    tx.add(&ds.nextId);
    tx.add((uint64_t *)&ds.last);
    for (uint64_t it : items) {
      tx.add(&d->stock[it].qty);
      tx.add(&d->stock[it].ytd);
      tx.add(&d->stock[it].orders);
    }
    tx.arm();
    for (uint64_t i = 0; i < lines; i++) {
      Stock &s = d->stock[items[i]];
      uint64_t q = o.line[i].qty;
      s.qty = s.qty >= q + 10 ? s.qty - q : s.qty + 91 - q;
      s.ytd += q;
      s.orders++;
    }
    ds.nextId = ds.nextId + 1;
    ds.last = &o;
    tx.commit();
    for (size_t k = locks.size(); k-- > 0;)
      stockLock[locks[k]].unlock(persistent_sync);
    districtLock[dist].unlock(persistent_sync);
  }
  std::string check() override {
    uint64_t qty = 0, lines = 0, ytd = 0, orders = 0;
    for (unsigned k = 0; k < DISTRICTS; k++) {
      uint64_t id = d->district[k].nextId;
      for (Order *o = d->district[k].last; o; o = o->prev) {
        if (o->check != sum(*o) || o->district != k)
          return "an order of district " + std::to_string(k) + " is torn";
        if (o->id != --id)
          return "district " + std::to_string(k) + " has order " +
                 std::to_string(o->id) + " where " + std::to_string(id) +
                 " belongs";
        lines += o->lines;
        for (uint64_t i = 0; i < o->lines; i++)
          qty += o->line[i].qty;
      }
      if (id != 0)
        return "district " + std::to_string(k) + " lost orders below " +
               std::to_string(id);
    }
    for (uint64_t i = 0; i < d->items; i++)
      ytd += d->stock[i].ytd, orders += d->stock[i].orders;
    if (ytd != qty || orders != lines)
      return "the stock rows count " + std::to_string(ytd) + " units in " +
             std::to_string(orders) + " lines, the orders " +
             std::to_string(qty) + " in " + std::to_string(lines);
    return "";
  }
};

} // namespace

ARP_WORKLOAD(Tpcc);
