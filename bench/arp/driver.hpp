// SPDX-License-Identifier: Apache-2.0
//
// driver.hpp -- what the arp workloads (bench/arp/*.cpp) are written
// against, and the driver that runs them as in the paper's section 6:
// `workers` threads (8) update persistent data; a work-allocator thread
// hands them tasks through per-worker 64-entry queues in DRAM, whose
// acquires and releases are volatile; two antagonist threads take a
// volatile lock around a shared DRAM counter until the workers finish.
// Persistent order comes only from pmkit::atomic (include/pmkit/arp.hpp):
// persistent locks around shared data, sequence points inside undo logging.
// A workload defines a class derived from Workload and ARP_WORKLOAD(it).
// Command line: NAME [--pool PATH] [--ops N] [--workers N] [--antagonists
// N] [--scale F] [--seed S] | --check POOL. It prints one JSON line; with
// --check it rolls back interrupted logs, checks the workload's invariants
// and exits 0 (consistent) or 1.

#ifndef PMKIT_BENCH_ARP_DRIVER_HPP
#define PMKIT_BENCH_ARP_DRIVER_HPP

#include "pmkit/arp.hpp"
#include "pmkit/pmkit.h"

#include <cstdint>
#include <string>
#include <vector>

namespace arpb {

using pmkit::persistent_sync;
using pmkit::volatile_sync;
constexpr auto ACQ = std::memory_order_acquire;
constexpr auto REL = std::memory_order_release;
constexpr auto RLX = std::memory_order_relaxed;

// xorshift64*: the task stream and the initial data are reproducible.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull | 1) {}
  uint64_t next() {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

struct Task {
  uint64_t a, b, c;
};

// A 64-bit mix (for checksums a torn or missing persist cannot satisfy).
inline uint64_t mix(uint64_t x) {
  x ^= x >> 33, x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// A table of `base` rows scaled by the --scale factor (at least 64).
inline uint64_t sized(uint64_t base, double scale) {
  double n = (double)base * scale;
  return n < 64 ? 64 : (uint64_t)n;
}

// Folds an array of words into h with mix().
template <size_t N> uint64_t mixAll(uint64_t h, const uint64_t (&w)[N]) {
  for (uint64_t v : w)
    h = mix(h ^ v);
  return h;
}

// A test-and-test-and-set lock whose acquire and release have the given
// persistency: persistent around persistent data, volatile elsewhere.
class SpinLock {
public:
  void lock(pmkit::persistency p) {
    for (;;) {
      uint32_t e = 0;
      if (v_.compare_exchange_weak(e, 1, ACQ, RLX, p))
        return;
      while (v_.load(RLX))
        __builtin_ia32_pause();
    }
  }
  void unlock(pmkit::persistency p) { v_.store(0, REL, p); }

private:
  pmkit::atomic<uint32_t> v_{0};
};

// An undo log in PM, one per worker, used through a Tx: add() saves a
// word's old value, arm() makes the saved values count (after a sequence
// point), commit() retires them after the new values (another sequence
// point). A crash between arm() and commit() is rolled back by recover().
// Three sequence points per transaction, as in the paper's logging
// workloads.
struct UndoLog {
  static constexpr unsigned MAX = 63;
  uint64_t n; // (tag << 8 | entries that count); 0 entries: nothing to undo
  struct {
    uint64_t *addr;
    uint64_t old;
    uint64_t tag; // the transaction's, as in n
    uint64_t sum; // of the three: a half-written entry does not match
  } e[MAX];
  void recover();
};

class Tx {
public:
  explicit Tx(UndoLog &log) : log_(log) {}
  void add(uint64_t *p);
  void arm();
  void commit();

private:
  UndoLog &log_;
  unsigned fill_ = 0; // in DRAM: entries written so far
};

// What each workload implements.
class Workload {
public:
  virtual ~Workload() = default;
  virtual const char *name() const = 0;
  // Builds the persistent data (size grows with `scale`) and returns the
  // pointer the driver keeps in the root.
  // `ops`: tasks the run will hand out (for append-only data).
  virtual void *create(pmkit_pool *pool, double scale, uint64_t ops,
                       Rng &rng) = 0;
  // Attaches to data made by create() (after an open).
  virtual void attach(void *data) = 0;
  // The next task of the stream.
  virtual Task task(Rng &rng) = 0;
  // Runs a task on worker w, with its undo log.
  virtual void run(unsigned w, const Task &t, Tx &tx) = 0;
  // After recovery: "" if consistent, else what is wrong.
  virtual std::string check() = 0;
};

// Every workload linked in, in the order their files registered them.
std::vector<Workload *> &registered();
struct Register {
  explicit Register(Workload *w) { registered().push_back(w); }
};
#define ARP_WORKLOAD(cls) static ::arpb::Register arp_workload_reg(new cls)

// Allocates zeroed PM or exits with a message.
void *palloc(pmkit_pool *pool, size_t size);

} // namespace arpb

#endif // PMKIT_BENCH_ARP_DRIVER_HPP
