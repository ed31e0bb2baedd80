// SPDX-License-Identifier: Apache-2.0
//
// driver.cpp -- runs one arp workload (driver.hpp): creates the pool, the
// undo logs and the workload's data, starts the workers, the work
// allocator and the antagonists, times the workers and prints one JSON
// line; or, with --check POOL, recovers and checks a pool image.

#include "driver.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>
#include <vector>

namespace arpb {

std::vector<Workload *> &registered() {
  static std::vector<Workload *> all;
  return all;
}

void *palloc(pmkit_pool *pool, size_t size) {
  void *p = nullptr;
  if (pmkit_zalloc(pool, size, &p) != 0) {
    fprintf(stderr, "arp: cannot allocate %zu bytes: %s\n", size,
            pmkit_errormsg());
    exit(2);
  }
  return p;
}

// `n` is (tag << 8 | count); each entry carries its transaction's tag and a
// checksum. The next transaction's entries follow a sequence point after
// this one's data, but nothing orders this one's disarm before them, and
// their words persist one by one: an entry the next transaction has
// touched at all (a newer tag, or a checksum that does not match) means
// the transaction n names is complete and must not be rolled back.
static uint64_t tagOf(uint64_t n) { return n >> 8; }
static uint64_t entrySum(const uint64_t *addr, uint64_t old, uint64_t tag) {
  return mix((uint64_t)(uintptr_t)addr ^ mix(old ^ mix(tag)));
}

void Tx::add(uint64_t *p) {
  if (fill_ == UndoLog::MAX) {
    fprintf(stderr, "arp: undo log full\n");
    abort();
  }
  auto &e = log_.e[fill_++];
  e.addr = p;
  e.old = *p;
  e.tag = tagOf(log_.n) + 1;
  e.sum = entrySum(p, e.old, e.tag);
}

void Tx::arm() {
  pmkit::sequence_point();
  log_.n = (tagOf(log_.n) + 1) << 8 | fill_;
  pmkit::sequence_point();
}

void Tx::commit() {
  pmkit::sequence_point();
  log_.n = tagOf(log_.n) << 8;
  fill_ = 0;
}

void UndoLog::recover() {
  uint64_t count = n & 0xff, tag = tagOf(n);
  if (!count)
    return;
  for (uint64_t i = 0; i < count; i++)
    if (e[i].tag != tag || e[i].sum != entrySum(e[i].addr, e[i].old, tag))
      count = 0; // the next transaction wrote here: this one finished
  for (uint64_t i = count; i-- > 0;)
    *e[i].addr = e[i].old;
  pmkit::sequence_point();
  n = tag << 8;
  pmkit::sequence_point();
}

namespace {

constexpr uint64_t MAGIC = 0x41525042454e4348ull; // "ARPBENCH"
constexpr uint64_t STOP = ~0ull;

struct Root {
  uint64_t magic;
  uint64_t workers;
  UndoLog *logs;
  void *data;
};

// A single-producer single-consumer queue in DRAM: its synchronisation
// orders the task hand-off, never persists, so it is volatile_sync.
struct alignas(64) TaskQueue {
  static constexpr uint64_t N = 64;
  pmkit::atomic<uint64_t> head{0};
  char pad[56];
  pmkit::atomic<uint64_t> tail{0};
  Task slot[N];
  bool push(const Task &t) {
    uint64_t tl = tail.load(RLX);
    if (tl - head.load(RLX) == N)
      return false;
    head.load(ACQ, volatile_sync); // the slot is free to reuse
    slot[tl % N] = t;
    tail.store(tl + 1, REL, volatile_sync);
    return true;
  }
  Task pop() {
    uint64_t h = head.load(RLX);
    while (tail.load(RLX) == h)
      __builtin_ia32_pause();
    tail.load(ACQ, volatile_sync);
    Task t = slot[h % N];
    head.store(h + 1, REL, volatile_sync);
    return t;
  }
};

struct Args {
  std::string pool = "/dev/shm/pmkit-arp.pool", check;
  uint64_t ops = 20000, seed = 1, poolMiB = 512;
  double scale = 1;
  unsigned workers = 8, antagonists = 2;
};

[[noreturn]] void usage(const char *name, const std::string &why) {
  std::string names;
  for (Workload *w : registered())
    names += std::string(names.empty() ? "" : "|") + w->name();
  fprintf(stderr,
          "%s: %s\nusage: %s %s [--pool PATH] [--pool-mib N] [--ops N] "
          "[--workers N] [--antagonists N] [--scale F] [--seed S]\n"
          "       %s WORKLOAD --check POOL\n",
          name, why.c_str(), name, names.c_str(), name);
  exit(2);
}

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 2; i < argc; i++) {
    std::string k = argv[i];
    if (i + 1 >= argc)
      usage(argv[0], k + " needs a value");
    char *end = nullptr;
    std::string v = argv[++i];
    uint64_t n = strtoull(v.c_str(), &end, 10);
    bool num = !v.empty() && !*end;
    if (k == "--pool")
      a.pool = v;
    else if (k == "--check")
      a.check = v;
    else if (k == "--scale" && strtod(v.c_str(), &end) > 0 && !*end)
      a.scale = strtod(v.c_str(), nullptr);
    else if (!num)
      usage(argv[0], k + " needs a number, not '" + v + "'");
    else if (k == "--ops")
      a.ops = n;
    else if (k == "--workers" && n >= 1 && n <= 64)
      a.workers = (unsigned)n;
    else if (k == "--antagonists" && n <= 16)
      a.antagonists = (unsigned)n;
    else if (k == "--seed")
      a.seed = n;
    else if (k == "--pool-mib" && n >= 8)
      a.poolMiB = n;
    else
      usage(argv[0], "bad option " + k + " " + v);
  }
  return a;
}

int check(Workload &w, const std::string &path) {
  pmkit_pool *pool = nullptr;
  if (pmkit_pool_open(path.c_str(), nullptr, &pool) != 0) {
    fprintf(stderr, "arp %s: cannot open %s: %s\n", w.name(), path.c_str(),
            pmkit_errormsg());
    return 2;
  }
  Root *r = nullptr;
  pmkit_root(pool, sizeof(Root), (void **)&r);
  if (r->magic != MAGIC) { // crashed while setting up: nothing to check
    printf("arp %s: consistent (not set up)\n", w.name());
    pmkit_pool_close(pool);
    return 0;
  }
  for (uint64_t i = 0; i < r->workers; i++)
    r->logs[i].recover();
  w.attach(r->data);
  std::string bad = w.check();
  pmkit_pool_close(pool);
  if (!bad.empty()) {
    printf("arp %s: INCONSISTENT: %s\n", w.name(), bad.c_str());
    return 1;
  }
  printf("arp %s: consistent\n", w.name());
  return 0;
}

} // namespace

} // namespace arpb

using namespace arpb;

int main(int argc, char **argv) {
  Workload *w = nullptr;
  for (Workload *x : registered())
    if (argc > 1 && !strcmp(argv[1], x->name()))
      w = x;
  if (!w)
    usage(argv[0], argc > 1 ? std::string("no workload '") + argv[1] + "'"
                            : std::string("which workload?"));
  Args a = parse(argc, argv);
  if (!a.check.empty())
    return check(*w, a.check);
  unlink(a.pool.c_str());
  pmkit_pool *pool = nullptr;
  if (pmkit_pool_create(a.pool.c_str(), a.poolMiB << 20, nullptr, &pool)) {
    fprintf(stderr, "arp %s: cannot create %s: %s\n", w->name(), a.pool.c_str(),
            pmkit_errormsg());
    return 2;
  }
  Root *r = nullptr;
  pmkit_root(pool, sizeof(Root), (void **)&r);
  Rng rng(a.seed);
  r->workers = a.workers;
  r->logs = (UndoLog *)palloc(pool, sizeof(UndoLog) * a.workers);
  r->data = w->create(pool, a.scale, a.ops, rng);
  pmkit_persist(r, sizeof *r);
  r->magic = MAGIC;
  pmkit_persist(&r->magic, 8);

  // The measured phase, for pmkit-sim --mark arp-run (set-up excluded).
  pmkit_mark_begin("arp-run");
  std::vector<TaskQueue> queues(a.workers);
  std::atomic<unsigned> running{a.workers};
  std::atomic<uint64_t> spins{0};
  std::vector<std::thread> th;
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < a.workers; i++)
    th.emplace_back([&, i] {
      Tx tx(r->logs[i]);
      for (;;) {
        Task t = queues[i].pop();
        if (t.a == STOP)
          break;
        w->run(i, t, tx);
      }
      running.fetch_sub(1);
    });
  th.emplace_back([&] { // the work allocator
    Rng trng(a.seed + 1);
    unsigned next = 0;
    for (uint64_t k = 0; k < a.ops; k++) {
      Task t = w->task(trng);
      while (!queues[next].push(t))
        next = (next + 1) % a.workers;
      next = (next + 1) % a.workers;
    }
    for (unsigned i = 0; i < a.workers; i++)
      while (!queues[i].push(Task{STOP, 0, 0}))
        std::this_thread::yield();
  });
  SpinLock antagonistLock;
  uint64_t counter = 0;
  for (unsigned i = 0; i < a.antagonists; i++)
    th.emplace_back([&] {
      // pmkit-sim --background arp-background repeats this thread's trace
      // for as long as the workers run, as the antagonists run here.
      pmkit_mark_begin("arp-background");
      uint64_t n = 0;
      while (running.load(std::memory_order_relaxed)) {
        antagonistLock.lock(volatile_sync);
        counter++;
        antagonistLock.unlock(volatile_sync);
        n++;
      }
      pmkit_mark_end("arp-background");
      spins.fetch_add(n);
    });
  for (unsigned i = 0; i < a.workers; i++)
    th[i].join();
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  for (size_t i = a.workers; i < th.size(); i++)
    th[i].join();
  pmkit_mark_end("arp-run");
  printf("{\"workload\": \"%s\", \"ops\": %llu, \"workers\": %u, "
         "\"antagonists\": %u, \"seconds\": %.6f, \"ops_per_sec\": %.1f, "
         "\"antagonist_iters\": %llu}\n",
         w->name(), (unsigned long long)a.ops, a.workers, a.antagonists, secs,
         secs > 0 ? (double)a.ops / secs : 0.0,
         (unsigned long long)spins.load());
  pmkit_pool_close(pool);
  return 0;
}
