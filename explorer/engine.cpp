// SPDX-License-Identifier: Apache-2.0
//
// engine.cpp -- walks a trace in its global order and, at each crash point,
// builds the crash images the model allows, de-duplicates them by content
// hash and hands them to checker slots running in parallel; then minimises
// the first failures and prints the report (and JSON). Entry point:
// explore().
//
// State. Memory is split into units (8-byte locations, or 64-byte lines for
// x86-line). For every unit written so far the engine keeps its write
// history (one piece per write touching it, with the unit's bytes before
// that write) and a lower bound lb: the first lb writes must have persisted
// at the current point. A crash image picks, for each unit, a number k in
// [lb, n] of its n writes to keep; the fully visible image (k = n
// everywhere) is kept current. With volatile caches (x86), lb moves by the
// Px86 rules: clflush raises lb of the units of its line at once; clwb,
// clflushopt and non-temporal stores raise it when their thread next
// fences (sfence, mfence, locked instruction). Without (eadr, strict),
// lb = n except for non-temporal stores not yet fenced: usually one image
// per point.

#include "explorer.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <unordered_set>

namespace pmx {

namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Piece {
  uint32_t ev;
  uint16_t off, len;
};

struct Unit {
  uint64_t addr;
  std::vector<Piece> hist;
  std::vector<uint8_t> before; // hist.size() x unit bytes
  uint32_t lb = 0;
  int32_t undPos = -1;
  uint32_t covered = 0; // sampled images that lost it alone
  // Every raise of lb: (index of the event being applied, new lb), so that
  // the report, run once the walk is past every point, knows lb at each.
  std::vector<std::pair<uint32_t, uint32_t>> lbLog;
  // lb for the images before events[pos].
  uint32_t lbAt(size_t pos) const {
    for (size_t i = lbLog.size(); i-- > 0;)
      if (lbLog[i].first < pos)
        return lbLog[i].second;
    return 0;
  }
};

// One deviation, as the engine knows it: unit ui keeps k of its n writes.
struct Choice {
  uint32_t ui, k, n;
};

struct JobInfo {
  size_t point = 0; // index into the crash points
  size_t pos = 0;   // the image is the state before events[pos], changed
  std::vector<Choice> choices;
  bool torn = false; // in the middle of events[pos - 1]
  uint64_t hash = 0; // of the image's content
};

// A crash point: before events[pos], or, torn, in the middle of the
// multi-word write events[pos] (eadr and strict: the write persisted a
// prefix of its words, in address order).
struct CrashPoint {
  size_t pos = 0;
  bool torn = false;
  size_t state() const { return torn ? pos + 1 : pos; } // events applied
};

// How much of one crash point was explored.
struct PointCover {
  double total = 0;   // images the model allows here (before de-duplication)
  uint64_t tried = 0; // candidate images generated here
  bool exhaustive = false;
  bool skipped = false; // the budget ran out before this point
};

struct Failure {
  JobInfo info;
  Result result;
};

// A count that may be astronomically large: exact below 10^15.
std::string approx(double v) {
  char b[32];
  if (std::isinf(v))
    return "more than 1e308";
  if (v < 1e15)
    snprintf(b, sizeof b, "%.0f", v);
  else
    snprintf(b, sizeof b, "%.1e", v);
  return b;
}

std::string approxJson(double v) { // JSON has no infinity: the largest
  v = std::min(v, std::numeric_limits<double>::max());
  char b[32];
  snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%#llx", (unsigned long long)v);
  return b;
}

// Where the pool file differs from `traced` (the pool's content replayed
// from the trace), when the file still holds what the program left at the
// close whose checksum is `sum` (else ""): up to four ranges, gaps under 8
// bytes merged, and the total.
std::string differingRanges(const Pool &pool, const uint8_t *traced,
                            uint64_t sum) {
  Buffer f(pool.size);
  int fd = open(pool.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "";
  bool whole = readAll(fd, f.data(), f.size());
  close(fd);
  if (!whole || pmkit_trace_checksum(f.data(), f.size()) != sum)
    return "";
  const uint8_t *b = f.data();
  std::string out;
  uint64_t total = 0, ranges = 0;
  for (size_t a = 0; a < f.size();) {
    if (a % 4096 == 0 && f.size() - a >= 4096 &&
        !memcmp(b + a, traced + a, 4096)) {
      a += 4096;
      continue;
    }
    if (b[a] == traced[a]) {
      a++;
      continue;
    }
    size_t last = a;
    for (size_t c = a; c < f.size() && c - last <= 8; c++)
      if (b[c] != traced[c])
        last = c, total++;
    if (ranges++ < 4)
      out += std::string(out.empty() ? "" : ", ") + "pool " +
             std::to_string(pool.id) + "+" + hex(a) + ".." + hex(last) + " (" +
             std::to_string(last - a + 1) + " bytes)";
    a = last + 1;
  }
  if (ranges > 4)
    out += " and " + std::to_string(ranges - 4) + " more";
  return std::to_string(total) + " bytes differ, at " + out;
}

std::string jsonStr(const std::string &s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      o += '\\', o += (char)c;
    else if (c < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else
      o += (char)c;
  }
  return o + "\"";
}

const char *kindName(uint8_t k) {
  switch (k) {
  case PMKIT_EV_STORE:
    return "store";
  case PMKIT_EV_NTSTORE:
    return "non-temporal store";
  case PMKIT_EV_RMW:
    return "atomic RMW";
  case PMKIT_EV_MEMSET:
    return "memset";
  case PMKIT_EV_FLUSH:
    return "flush";
  case PMKIT_EV_FENCE:
    return "fence";
  case PMKIT_EV_LOAD:
    return "load";
  case PMKIT_EV_MARK_BEGIN:
    return "mark begin";
  case PMKIT_EV_MARK_END:
    return "mark end";
  case PMKIT_EV_POOL_OPEN:
    return "pool open";
  case PMKIT_EV_POOL_CLOSE:
    return "pool close";
  case PMKIT_EV_ACQUIRE:
    return "acquire";
  case PMKIT_EV_RELEASE:
    return "release";
  case PMKIT_EV_SEQPOINT:
    return "sequence point";
  case PMKIT_EV_CALL:
    return "uninstrumented call";
  }
  return "?";
}

class Engine {
public:
  Engine(const Trace &T, const Options &O)
      : T(T), O(O), M(makeModel(O.model)), shift(M->unitShift()),
        U(1u << shift), pending(T.threads + 1) {
    if (M->persistOrder()) {
      PO = std::make_unique<PersistOrder>(T);
      durCnt.assign(PO->width(), 0);
    }
    for (const Pool &p : T.pools) {
      bool dup = false;
      for (const PoolState &s : pools)
        dup |= s.pool->base == p.base;
      if (!dup) {
        PoolState st{&p, Buffer(p.size)};
        for (uint64_t pg : p.pages) // only data: the rest stays zero
          memcpy(st.cur.data() + pg * PMKIT_TRACE_PAGE,
                 p.image.data() + pg * PMKIT_TRACE_PAGE, PMKIT_TRACE_PAGE);
        pools.push_back(std::move(st));
      }
    }
    runtimeLoc.assign(T.events.size(), 0);
    for (size_t i = 0; i < T.events.size(); i++) {
      const Event &e = T.events[i];
      runtimeLoc[i] = T.inRuntime(e.loc);
      if (e.writes() && !runtimeLoc[i])
        userWrites.push_back((uint32_t)i);
    }
    if (O.robustness)
      hbInit();
    for (PoolState &s : pools) // zero units hash to 0: only data pages count
      for (uint64_t pg : s.pool->pages)
        for (uint64_t a = pg * PMKIT_TRACE_PAGE;
             a < (pg + 1) * PMKIT_TRACE_PAGE; a += U)
          H += uh(s.pool->base + a, s.cur.data() + a);
  }

  int run();

private:
  const Trace &T;
  const Options &O;
  std::unique_ptr<Model> M;
  unsigned shift, U;
  struct PoolState {
    const Pool *pool;
    Buffer cur;
  };
  std::vector<PoolState> pools;
  std::vector<Unit> units;
  std::unordered_map<uint64_t, uint32_t> index;
  std::vector<uint32_t> und; // units with lb < n
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> pending;
  // The arp model: the persist order, each write's (unit, piece) pairs, how
  // many of each thread's first writes are durable because a durable write
  // is ordered after them, and the writes that became durable.
  std::unique_ptr<PersistOrder> PO;
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>>
      evUnits;
  std::vector<uint32_t> durCnt, durQueue;
  uint64_t H = 0;
  size_t at = 0; // events applied
  std::vector<std::string> warnings;
  std::unordered_set<uint64_t> seen; // content hashes of images generated

  // Statistics.
  uint64_t generated = 0, distinct = 0, checked = 0, failed = 0;
  size_t npoints = 0, allPoints = 0;
  size_t redundantPoints = 0;    // no write since the point before: skipped
  std::vector<PointCover> cover; // per explored crash point
  uint64_t perPoint = 0;         // images of the point being generated
  std::vector<uint64_t> quota;   // per crash point, planned from the budget
  std::vector<double> planTotals(const std::vector<CrashPoint> &pts);
  void planQuotas();
  std::vector<Failure> failures;

  // --robustness: images no strict-persistency execution produces, by the
  // pair of writes (lost, later kept) that shows it.
  struct Violation {
    uint32_t lostEv, keptEv;
    uint64_t images = 0;
    size_t pos = 0;
  };
  std::map<std::pair<std::string, std::string>, Violation> violations;
  uint64_t nonRobust = 0, robustChecked = 0, wholeImage = 0;
  // The 8-byte words the checker read, sorted: a write it did not read
  // does not count, even when it shares a unit (a cache line under
  // x86-line) with one it did.
  using ReadSet = std::vector<uint64_t>;
  struct RobustReads {
    bool known = false;
    ReadSet words;
  };
  std::unordered_map<uint64_t, RobustReads> robustReads; // by image hash
  std::unordered_map<uint64_t, std::vector<JobInfo>> robustWaiting;
  std::vector<uint32_t> userWrites; // the program's write events, ascending
  std::vector<uint8_t> runtimeLoc;  // per event: written by the runtime
  bool runtimeEv(uint32_t ev) const { return runtimeLoc[ev]; }
  void robustness(const JobInfo &info, const ReadSet *reads);
  using Key = std::pair<uint32_t, uint64_t>; // (event, address of a word)
  static constexpr uint32_t NONE_EV = UINT32_MAX;
  static constexpr uint32_t DURABLE_EV = UINT32_MAX - 1;
  bool persistPair(const JobInfo &info, const ReadSet *reads, Key &lost,
                   Key &kept);
  // Happens-before between the threads of a multi-threaded trace that has
  // the program's loads: program order, a load or RMW reading an 8-byte word
  // whose last write was another thread's (reads-from; the runtime's own
  // writes follow its own locks and are left out), and every thread after
  // what the first thread did before any other showed (the set-up before
  // the threads were started; creation and joins are not in the trace, so
  // a thread started later is not ordered after what its creator did in
  // between, unless it reads it). A lost write and
  // a later kept one of another thread with no such path between them are not a
  // violation: strict persistency may order two unsynchronised writes either
  // way. Vector clocks of the write events; hbOn is false for one thread or a
  // trace without loads (then the recorded order counts, as for one thread).
  bool hbOn = false;
  uint32_t nthr = 1;
  std::vector<uint32_t> thrOf, thrSeq;         // per event
  std::unordered_map<uint32_t, uint32_t> vcAt; // write event -> offset in vcs
  std::vector<uint32_t> vcs;
  uint64_t unordered = 0; // images whose losses only unordered writes follow
  void hbInit();
  bool hb(uint32_t a, uint32_t b) const;
  bool orderedPair(const JobInfo &info, const ReadSet &reads, Key &lost,
                   Key &kept);
  // Failing images by (lost write's location, later kept write's
  // location; 0 when none was kept after it), with a count and an example.
  struct FailGroup {
    uint64_t images = 0;
    uint32_t lostEv = 0, keptEv = NONE_EV;
  };
  std::map<std::pair<std::string, std::string>, FailGroup> failGroups;
  void groupFailure(const JobInfo &info);
  std::string programSite(size_t pos) const;
  std::string place(uint32_t loc) const;
  std::string groupKey(uint32_t loc, uint32_t ev) const;
  uint32_t culprit(const Failure &f);
  void robustDuplicate(uint64_t h, const JobInfo &info);
  void robustResult(const JobInfo &info, const Result &r);
  std::string violationText(const Violation &v) const;

  // Checker slots and the job queue.
  std::vector<std::unique_ptr<Checker>> slots;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> queue;
  std::vector<Result> results;
  std::map<uint64_t, JobInfo> inflight;
  size_t busy = 0;
  bool closing = false;
  std::string fatal;
  uint64_t nextId = 1;

  uint64_t uh(uint64_t addr, const uint8_t *b) const {
    uint64_t h = 0, any = 0;
    for (unsigned i = 0; i < U; i += 8) {
      uint64_t w;
      memcpy(&w, b + i, 8);
      any |= w;
      h = mix(h ^ w ^ (i * 0x9e3779b97f4a7c15ull));
    }
    return any ? mix(h ^ addr) : 0; // zero units add nothing
  }

  uint8_t *curAt(uint64_t addr) {
    for (PoolState &s : pools)
      if (addr >= s.pool->base && addr - s.pool->base < s.pool->size)
        return s.cur.data() + (addr - s.pool->base);
    return nullptr;
  }

  void setUnd(uint32_t ui) {
    Unit &u = units[ui];
    bool want = u.lb < u.hist.size();
    if (want && u.undPos < 0) {
      u.undPos = (int32_t)und.size();
      und.push_back(ui);
    } else if (!want && u.undPos >= 0) {
      uint32_t last = und.back();
      und[u.undPos] = last;
      units[last].undPos = u.undPos;
      und.pop_back();
      u.undPos = -1;
    }
  }

  void raise(uint32_t ui, uint32_t cnt) {
    Unit &u = units[ui];
    if (cnt > u.lb) {
      if (PO)
        for (uint32_t j = u.lb; j < cnt; j++)
          durQueue.push_back(u.hist[j].ev);
      u.lb = cnt;
      u.lbLog.push_back({(uint32_t)at, cnt});
      setUnd(ui);
    }
  }
  void settle();
  bool close(std::vector<Choice> &cs);
  std::vector<Choice> recentLoss(std::mt19937_64 &rng);

  void fence(uint32_t tid) {
    for (auto [ui, cnt] : pending[tid])
      raise(ui, cnt);
    pending[tid].clear();
  }

  void apply(size_t i);
  void advance(size_t pos) {
    for (; at < pos; at++) {
      apply(at);
      if (PO)
        settle();
    }
  }
  std::vector<CrashPoint> crashPoints();
  void generate(size_t point, const CrashPoint &cp);
  void tornImages(const CrashPoint &cp, std::vector<std::vector<Choice>> &cand,
                  PointCover &pc);
  void sample(const std::vector<uint32_t> &u, std::mt19937_64 &rng,
              std::vector<std::vector<Choice>> &cand);
  bool budgetHit = false;
  uint64_t imageHash(const std::vector<Choice> &cs);
  Job makeJob(size_t pos, const std::vector<Choice> &cs);
  void submit(JobInfo &info, uint64_t hash);
  void collect(bool all);
  void workerLoop(unsigned slot);
  Result checkNow(const JobInfo &info);
  void minimise(Failure &f);
  void progress(bool final);
  void report(double secs);
  std::string gaps(size_t exhaustivePts, size_t sampledPts,
                   size_t skippedPts) const;
  std::string describePoint(size_t pos) const;
  std::string describeJob(const JobInfo &info) const;
  std::string operationAt(size_t pos) const;
  std::vector<CrashPoint> pointsList;
  std::chrono::steady_clock::time_point start, lastProgress;
};

void Engine::apply(size_t i) {
  const Event &e = T.events[i];
  if (PO)
    PO->observe(i);
  if (e.writes()) {
    uint64_t len = e.length();
    for (uint64_t a = e.addr & ~(uint64_t)(U - 1); a < e.addr + len; a += U) {
      uint8_t *c = curAt(a);
      if (!c)
        continue;
      auto [it, fresh] = index.try_emplace(a, (uint32_t)units.size());
      if (fresh)
        units.push_back(Unit{a, {}, {}, 0, -1, 0, {}});
      uint32_t ui = it->second;
      Unit &u = units[ui];
      uint64_t lo = std::max(a, e.addr), hi = std::min(a + U, e.addr + len);
      // One piece per 8-byte word: a store wider than 8 bytes is atomic
      // per word only, and a line (x86-line) persists its words in store
      // order, so a multi-word write inside a line can leave a prefix.
      H -= uh(a, c);
      for (uint64_t w = lo; w < hi; w = (w & ~7ull) + 8) {
        uint64_t we = std::min<uint64_t>(hi, (w & ~7ull) + 8);
        // A word written with the bytes it already holds changes no image:
        // lost or kept, the unit reads the same (a later write in a unit
        // persists only after the earlier ones, so keeping it keeps what
        // made those bytes). Zeroing zeros (a fresh block's memset) would
        // otherwise multiply a point's images by its words, all alike. The
        // arp model keeps it: its durability drags earlier writes along.
        bool same = !PO;
        for (uint64_t b = w; same && b < we; b++)
          same = c[b - a] == e.byte(b - e.addr);
        if (same)
          continue;
        u.before.insert(u.before.end(), c, c + U);
        for (uint64_t b = w; b < we; b++)
          c[b - a] = e.byte(b - e.addr);
        u.hist.push_back(
            Piece{(uint32_t)i, (uint16_t)(w - a), (uint16_t)(we - w)});
      }
      H += uh(a, c);
      if (PO)
        evUnits[(uint32_t)i].push_back({ui, (uint32_t)u.hist.size() - 1});
      // A non-temporal store bypasses the cache (eADR does not cover its
      // write-combining buffer): it persists at its thread's next fence in
      // every model but strict. Other writes persist at once without volatile
      // caches.
      if (e.kind == PMKIT_EV_NTSTORE && M->ntWaitsForFence())
        pending[e.tid].push_back({ui, (uint32_t)u.hist.size()});
      else if (!M->volatileCaches()) {
        u.lb = (uint32_t)u.hist.size();
        u.lbLog.push_back({(uint32_t)at, u.lb});
      }
      setUnd(ui);
    }
    if (e.kind == PMKIT_EV_RMW)
      fence(e.tid);
  } else if (e.kind == PMKIT_EV_FLUSH && M->volatileCaches()) {
    uint64_t line = e.addr & ~63ull;
    for (uint64_t a = line; a < line + 64; a += U) {
      auto it = index.find(a);
      if (it == index.end())
        continue;
      uint32_t n = (uint32_t)units[it->second].hist.size();
      if (e.aux == PMKIT_FLUSH_CLFLUSH)
        raise(it->second, n);
      else
        pending[e.tid].push_back({it->second, n});
    }
  } else if (e.kind == PMKIT_EV_FENCE) {
    fence(e.tid);
  } else if (e.kind == PMKIT_EV_POOL_CLOSE) {
    for (PoolState &s : pools)
      if (s.pool->base == e.addr &&
          pmkit_trace_checksum(s.cur.data(), s.pool->size) != e.arg) {
        // What could have written there: the last uninstrumented calls
        // given a pointer into this pool.
        std::string calls;
        unsigned n = 0;
        for (size_t j = i; j-- > 0 && n < 3 && i - j < 1000000;) {
          const Event &c = T.events[j];
          if (c.kind != PMKIT_EV_CALL || runtimeLoc[j] ||
              c.addr < s.pool->base || c.addr - s.pool->base >= s.pool->size)
            continue;
          calls += std::string(n++ ? ", " : "") + place(c.loc) + " (thread " +
                   std::to_string(c.tid) + ", pointer pool " +
                   std::to_string(s.pool->id) + "+" +
                   hex(c.addr - s.pool->base) + ")";
        }
        std::string where = differingRanges(*s.pool, s.cur.data(), e.arg);
        warnings.push_back(
            "the content of pool " + s.pool->path + " at close (event " +
            std::to_string(i) +
            ") differs from the traced writes: some writes were not seen "
            "(uninstrumented code or a system call wrote to the pool); " +
            (where.empty() ? std::string("the pool file no longer holds that "
                                         "content, so the bytes are unknown")
                           : where) +
            "; " +
            (calls.empty() ? std::string("no uninstrumented call was given a "
                                         "pointer into it (inline asm?)")
                           : "the last uninstrumented calls given a pointer "
                             "into it: " +
                                 calls) +
            "; crash images may be wrong");
      }
  }
}

// The arp model: a write ordered before a durable write is durable too
// (with the writes before it in its unit), transitively.
void Engine::settle() {
  while (!durQueue.empty()) {
    uint32_t ev = durQueue.back();
    durQueue.pop_back();
    const uint32_t *D = PO->front(ev);
    for (uint32_t u = 0; u < PO->width(); u++)
      while (durCnt[u] < D[u]) {
        uint32_t ev2 = PO->writesOf(u)[durCnt[u]++];
        for (auto [ui, pos] : evUnits[ev2])
          raise(ui, pos + 1);
      }
  }
}

// The arp model's candidate images: each thread loses some of its most
// recent writes (up to 64 back, each with probability 1/2), the writes an
// ordering lets go first; close() then adds what they drag along. Uniform
// choices per unit mostly lose an early write and, closed, little is left.
std::vector<Choice> Engine::recentLoss(std::mt19937_64 &rng) {
  std::unordered_map<uint32_t, uint32_t> keep; // unit -> pieces kept
  for (uint32_t t = 0; t < PO->width(); t++) {
    const std::vector<uint32_t> &ws = PO->writesOf(t);
    size_t span = std::min<size_t>(ws.size(), 1 + rng() % 64);
    for (size_t i = ws.size() - span; i < ws.size(); i++) {
      if (rng() % 2)
        continue;
      for (auto [ui, pos] : evUnits[ws[i]]) {
        if (pos < units[ui].lb)
          continue; // durable
        auto it = keep.find(ui);
        if (it == keep.end() || pos < it->second)
          keep[ui] = pos;
      }
    }
  }
  std::vector<Choice> cs;
  for (auto [ui, k] : keep)
    cs.push_back({ui, k, (uint32_t)units[ui].hist.size()});
  std::sort(cs.begin(), cs.end(),
            [](const Choice &a, const Choice &b) { return a.ui < b.ui; });
  return cs;
}

// The arp model: loses, with each lost write, every write ordered after it,
// so that the image keeps with each write everything ordered before it.
// Returns whether it had to lose more than `cs` said.
bool Engine::close(std::vector<Choice> &cs) {
  size_t W = PO->width();
  std::vector<uint32_t> minLost(W, UINT32_MAX); // per thread: first lost
  std::unordered_map<uint32_t, size_t> where;   // unit -> its choice
  auto lose = [&](uint32_t ui, uint32_t from, uint32_t to) {
    for (uint32_t j = from; j < to; j++) {
      uint32_t ev = units[ui].hist[j].ev, t = PO->thread(ev);
      minLost[t] = std::min(minLost[t], PO->index(ev));
    }
  };
  for (size_t c = 0; c < cs.size(); c++) {
    where[cs[c].ui] = c;
    lose(cs[c].ui, cs[c].k, cs[c].n);
  }
  bool any = false;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t ui : und) {
      const Unit &u = units[ui];
      auto it = where.find(ui);
      uint32_t n = (uint32_t)u.hist.size();
      uint32_t k = it == where.end() ? n : cs[it->second].k;
      // Only writes whose bytes the image shows are held to the order: an
      // earlier write covered by a later kept one may never have persisted.
      uint64_t covered = 0;
      for (uint32_t j = k; j-- > u.lb;) {
        const Piece &pc = u.hist[j];
        uint64_t mask = (pc.len >= 64 ? ~0ull : ((1ull << pc.len) - 1))
                        << pc.off;
        if (!(mask & ~covered))
          continue;
        covered |= mask;
        const uint32_t *D = PO->front(pc.ev);
        size_t t = 0;
        while (t < W && D[t] <= minLost[t])
          t++;
        if (t == W)
          continue; // ordered after no lost write
        lose(ui, j, k);
        if (it == where.end()) {
          where[ui] = cs.size();
          cs.push_back({ui, j, n});
        } else {
          cs[it->second].k = j;
        }
        changed = any = true;
        break;
      }
    }
  }
  return any;
}

std::vector<CrashPoint> Engine::crashPoints() {
  std::string pts = O.points.empty() ? M->defaultPoints() : O.points;
  if (pts != "fences" && pts != "stores" && pts != "marks" && pts != "all")
    throw Error("unknown --points '" + pts +
                "' (choose from fences, stores, marks, all)");
  size_t first = T.events.size();
  for (size_t i = 0; i < T.events.size(); i++)
    if (T.events[i].kind == PMKIT_EV_POOL_OPEN) {
      first = i + 1;
      break;
    }
  uint32_t markId = 0;
  bool scoped = !O.mark.empty();
  if (scoped) {
    for (auto &[id, name] : T.marks)
      if (name == O.mark)
        markId = id;
    if (!markId)
      throw Error("the trace has no operation marked '" + O.mark + "'");
  }
  std::vector<int> depth(T.threads + 1, 0);
  int inside = 0;
  std::vector<CrashPoint> out;
  bool wrote = true;
  // Without volatile caches a write persists as it becomes visible, so a
  // crash inside a write wider than one unit leaves a prefix of it.
  auto tears = [&](const Event &e) {
    if (M->volatileCaches() || !e.writes() ||
        (e.kind == PMKIT_EV_NTSTORE && M->ntWaitsForFence()))
      return false;
    uint64_t first = e.addr >> shift, last = (e.addr + e.length() - 1) >> shift;
    return e.length() > 0 && last > first && T.poolOf(e.addr);
  };
  for (size_t i = 0; i < T.events.size(); i++) {
    const Event &e = T.events[i];
    if (i >= first && (!scoped || inside > 0)) {
      bool take = pts == "all";
      if (pts == "fences")
        take = e.kind == PMKIT_EV_FENCE || e.kind == PMKIT_EV_RMW ||
               e.kind == PMKIT_EV_POOL_CLOSE ||
               (e.kind == PMKIT_EV_FLUSH && e.aux == PMKIT_FLUSH_CLFLUSH);
      else if (pts == "stores") // and fences: unfenced NT stores end there
        take = e.writes() || e.kind == PMKIT_EV_FENCE;
      else if (pts == "marks")
        take = e.kind == PMKIT_EV_MARK_BEGIN || e.kind == PMKIT_EV_MARK_END;
      // The end of each marked operation is a point too: an operation with no
      // fence of its own had none, and its writes, lost together, were never
      // crashed (a program with no mode came out clean under --mark).
      if (scoped && e.kind == PMKIT_EV_MARK_END && e.arg == markId)
        take = true;
      // A point with no write since the previous one is redundant: lower
      // bounds only rise, so its images are among that point's.
      if (take && !wrote && !out.empty())
        redundantPoints++;
      else if (take)
        out.push_back({i, false}), wrote = false;
      if (take && pts != "fences" && pts != "marks" && tears(e))
        out.push_back({i, true});
    }
    if (e.writes())
      wrote = true;
    if (scoped && e.arg == markId &&
        (e.kind == PMKIT_EV_MARK_BEGIN || e.kind == PMKIT_EV_MARK_END)) {
      int d = e.kind == PMKIT_EV_MARK_BEGIN ? 1 : -1;
      if (depth[e.tid] + d >= 0) {
        depth[e.tid] += d;
        inside += d;
      }
    }
  }
  if (first <= T.events.size() && (!scoped || inside > 0 || out.empty()))
    out.push_back({T.events.size(), false});
  return out;
}

uint64_t Engine::imageHash(const std::vector<Choice> &cs) {
  uint64_t h = H;
  for (const Choice &c : cs) {
    Unit &u = units[c.ui];
    h -= uh(u.addr, curAt(u.addr));
    h += uh(u.addr, u.before.data() + (size_t)c.k * U);
  }
  return h;
}

Job Engine::makeJob(size_t pos, const std::vector<Choice> &cs) {
  Job j;
  j.pos = pos;
  for (const Choice &c : cs) {
    const Unit &u = units[c.ui];
    const uint8_t *b = u.before.data() + (size_t)c.k * U;
    j.devs.push_back(Dev{u.addr, std::vector<uint8_t>(b, b + U)});
  }
  return j;
}

void Engine::workerLoop(unsigned slot) {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return closing || !queue.empty(); });
      if (queue.empty())
        return;
      job = std::move(queue.front());
      queue.pop_front();
      busy++;
    }
    Result r;
    try {
      r = slots[slot]->check(job);
    } catch (const Error &e) {
      std::lock_guard<std::mutex> l(mu);
      if (fatal.empty())
        fatal = e.what();
      busy--;
      cv.notify_all();
      continue;
    }
    std::lock_guard<std::mutex> l(mu);
    r.id = job.id;
    results.push_back(std::move(r));
    busy--;
    cv.notify_all();
  }
}

void Engine::submit(JobInfo &info, uint64_t hash) {
  info.hash = hash;
  Job j = makeJob(info.pos, info.choices);
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return queue.size() < 2 * slots.size() || !fatal.empty(); });
  j.id = nextId++;
  inflight[j.id] = info;
  queue.push_back(std::move(j));
  cv.notify_all();
}

// Takes finished results (all: wait for every job in flight).
void Engine::collect(bool all) {
  std::unique_lock<std::mutex> l(mu);
  if (all)
    cv.wait(l, [&] { return (queue.empty() && busy == 0) || !fatal.empty(); });
  if (!fatal.empty())
    throw Error(fatal);
  for (Result &r : results) {
    JobInfo info = std::move(inflight[r.id]);
    inflight.erase(r.id);
    checked++;
    if (O.robustness)
      robustResult(info, r);
    if (r.cannotRun)
      throw Error("the checker could not run (" + r.status + ")" +
                  (r.output.empty() ? "" : ": " + r.output));
    if (!r.ok) {
      failed++;
      groupFailure(info);
      if (failures.size() < 1000)
        failures.push_back({std::move(info), std::move(r)});
    }
  }
  results.clear();
}

Result Engine::checkNow(const JobInfo &info) {
  Job j = makeJob(info.pos, info.choices);
  j.id = 0;
  return slots[0]->check(j);
}

// The images of a torn crash point: the write events[cp.pos] (just applied)
// persisted its first j units, in address order, and lost the rest; every
// earlier write persisted (eadr, strict).
void Engine::tornImages(const CrashPoint &cp,
                        std::vector<std::vector<Choice>> &cand,
                        PointCover &pc) {
  const Event &e = T.events[cp.pos];
  std::vector<uint32_t> us; // the write's units, ascending
  for (uint64_t a = e.addr & ~(uint64_t)(U - 1); a < e.addr + e.length();
       a += U) {
    auto it = index.find(a);
    // (a unit whose last write is an earlier one: this write changed none
    // of its bytes, apply() kept no piece of it)
    if (it != index.end() && !units[it->second].hist.empty() &&
        units[it->second].hist.back().ev == cp.pos)
      us.push_back(it->second);
  }
  size_t W = us.size();
  pc.total = (double)W + 1;
  std::vector<size_t> js;
  if (W + 1 <= perPoint) {
    pc.exhaustive = true;
    for (size_t j = 0; j <= W; j++)
      js.push_back(j);
  } else { // the ends, then prefixes spread evenly
    std::mt19937_64 rng(mix(O.seed ^ mix(cp.pos * 2 + 1)));
    js = {0, W, 1, W - 1};
    while (js.size() < perPoint)
      js.push_back(1 + rng() % (W - 1));
  }
  for (size_t j : js) {
    std::vector<Choice> cs;
    for (size_t i = j; i < W; i++) {
      uint32_t n = (uint32_t)units[us[i]].hist.size();
      cs.push_back({us[i], n - 1, n});
    }
    cand.push_back(std::move(cs));
  }
}

// Candidate images for a crash point with more images than perPoint. Bugs
// of ordering show when some writes are lost while later ones persisted,
// so beside uniform random choices (three rounds in eight: a bug that shows
// in one image of 64 is only found by enough of them) the sampler takes,
// in turn: each unit alone lost (least covered across points first, then
// the most recent) and each alone kept, runs of consecutive undetermined
// writes lost (windows of the store order, often ending just before the
// last writes), pairs, intermediate values of units written several times
// (write-after-write chains) and random subsets of other densities.
void Engine::sample(const std::vector<uint32_t> &u, std::mt19937_64 &rng,
                    std::vector<std::vector<Choice>> &cand) {
  auto nOf = [&](uint32_t ui) { return (uint32_t)units[ui].hist.size(); };
  auto lbChoice = [&](uint32_t ui) {
    return Choice{ui, units[ui].lb, nOf(ui)};
  };
  auto randK = [&](uint32_t ui) { // a choice that loses at least one write
    uint32_t lb = units[ui].lb, n = nOf(ui);
    return Choice{ui, lb + (uint32_t)(rng() % (n - lb)), n};
  };
  std::vector<Choice> none;
  for (uint32_t ui : u)
    none.push_back(lbChoice(ui));
  cand.push_back(none);
  cand.push_back({});
  // Singles: the least covered first, then the most recently written.
  std::vector<uint32_t> byNeed(u);
  std::stable_sort(byNeed.begin(), byNeed.end(), [&](uint32_t a, uint32_t b) {
    if (units[a].covered != units[b].covered)
      return units[a].covered < units[b].covered;
    return units[a].hist.back().ev > units[b].hist.back().ev;
  });
  std::vector<uint32_t> byRecent(u);
  std::stable_sort(byRecent.begin(), byRecent.end(),
                   [&](uint32_t a, uint32_t b) {
                     return units[a].hist.back().ev > units[b].hist.back().ev;
                   });
  // The undetermined writes in store order: (event, unit, piece).
  struct W {
    uint32_t ev, ui, j;
  };
  std::vector<W> order;
  for (uint32_t ui : u)
    for (uint32_t j = units[ui].lb; j < nOf(ui); j++)
      order.push_back({units[ui].hist[j].ev, ui, j});
  std::sort(order.begin(), order.end(), [&](const W &a, const W &b) {
    if (a.ev != b.ev)
      return a.ev < b.ev;
    return units[a.ui].addr != units[b.ui].addr
               ? units[a.ui].addr < units[b.ui].addr
               : a.j < b.j;
  });
  std::vector<uint32_t> multi; // units with several undetermined writes
  for (uint32_t ui : u)
    if (nOf(ui) - units[ui].lb >= 2)
      multi.push_back(ui);
  auto sortChoices = [&](std::vector<Choice> &cs) {
    std::sort(cs.begin(), cs.end(), [&](const Choice &a, const Choice &b) {
      return units[a.ui].addr < units[b.ui].addr;
    });
  };
  size_t lost1 = 0, kept1 = 0, pairs = 0;
  size_t structuredEnd = PO ? 2 + (perPoint - 2) / 2 : perPoint;
  for (unsigned round = 0; cand.size() < perPoint; round++) {
    if (PO && cand.size() >= structuredEnd) {
      // arp: the rest mostly what ordering lets go first, recent writes.
      cand.push_back(recentLoss(rng));
      if (cand.size() % 4)
        continue;
    }
    std::vector<Choice> cs;
    // In eight rounds: one single loss, one keep-one, two windows, one
    // pair or chain, three random subsets; a strategy with nothing left
    // to try gives its round to a uniform random image.
    unsigned r = round % 8;
    if (r == 0 && lost1 < byNeed.size()) { // one unit lost
      uint32_t ui = byNeed[lost1++];
      units[ui].covered++;
      cs.push_back(round % 16 < 8 ? lbChoice(ui)
                                  : Choice{ui, nOf(ui) - 1, nOf(ui)});
    } else if (r == 1 && kept1 < byRecent.size()) { // one unit kept
      uint32_t keep = byRecent[kept1++];
      for (uint32_t ui : u)
        if (ui != keep)
          cs.push_back(lbChoice(ui));
    } else if ((r == 2 || r == 4) && !order.empty()) {
      // A window of the store order lost, often ending at the last writes.
      size_t m = order.size();
      size_t end =
          rng() % 2 ? m - std::min<size_t>(m - 1, rng() % 4) : 1 + rng() % m;
      size_t len = 1 + rng() % end;
      std::unordered_map<uint32_t, uint32_t> k;
      for (size_t i = end - len; i < end; i++) {
        auto [it, fresh] = k.try_emplace(order[i].ui, order[i].j);
        if (!fresh)
          it->second = std::min(it->second, order[i].j);
      }
      for (auto [ui, kk] : k)
        cs.push_back({ui, kk, nOf(ui)});
    } else if (r == 3 && round % 16 < 8 && u.size() >= 2) {
      // Two units lost: a recent one and any.
      uint32_t a = byRecent[pairs++ % byRecent.size()];
      uint32_t b = u[rng() % u.size()];
      if (a == b)
        b = byRecent[(pairs + byRecent.size() / 2) % byRecent.size()];
      cs.push_back(randK(a));
      if (b != a)
        cs.push_back(randK(b));
    } else if (r == 3 && !multi.empty()) {
      // An intermediate value of a unit written several times.
      uint32_t ui = multi[rng() % multi.size()];
      uint32_t lb = units[ui].lb, n = nOf(ui);
      cs.push_back({ui, lb + 1 + (uint32_t)(rng() % (n - lb - 1)), n});
      for (uint32_t o : u) // and some others lost
        if (o != ui && rng() % 4 == 0)
          cs.push_back(randK(o));
    } else if (r == 6) { // a random subset of another density
      static const unsigned density[] = {1, 4, 12, 15}; // sixteenths
      unsigned d = density[rng() % 4];
      for (uint32_t ui : u)
        if (rng() % 16 < d)
          cs.push_back(randK(ui));
    } else { // uniform: each unit keeps any of its allowed prefixes
      for (uint32_t ui : u) {
        uint32_t n = nOf(ui);
        uint32_t k = units[ui].lb + (uint32_t)(rng() % (n - units[ui].lb + 1));
        if (k < n)
          cs.push_back({ui, k, n});
      }
    }
    sortChoices(cs);
    cand.push_back(std::move(cs));
  }
}

// The images each crash point allows, from a walk of the trace by a second
// engine that generates nothing.
std::vector<double> Engine::planTotals(const std::vector<CrashPoint> &pts) {
  Engine walk(T, O);
  std::vector<double> totals;
  for (const CrashPoint &cp : pts) {
    walk.advance(cp.state());
    if (cp.torn) {
      const Event &e = T.events[cp.pos];
      uint64_t first = e.addr >> shift,
               last = (e.addr + e.length() - 1) >> shift;
      totals.push_back((double)(last - first) + 2);
      continue;
    }
    double product = 1;
    for (uint32_t ui : walk.und)
      product *= walk.units[ui].hist.size() - walk.units[ui].lb + 1;
    totals.push_back(product);
  }
  return totals;
}

// Shares the budget out over the crash points. With --per-point K every
// point gets K (at most its share of the budget). Otherwise points are
// enumerated exhaustively, smallest first, as long as the budget still
// leaves 64 images for each point after them; the rest of the budget is
// shared evenly by the points that must be sampled (at most 1024 each), so
// that a bug showing in one image of 64 at a sampled point is found with
// almost every seed.
void Engine::planQuotas() {
  uint64_t share =
      std::max<uint64_t>(2, O.budget / std::max<size_t>(1, npoints));
  if (O.perPoint) {
    quota.assign(npoints, std::min(share, O.perPoint));
    return;
  }
  std::vector<double> totals = planTotals(pointsList);
  std::vector<size_t> order(npoints);
  for (size_t i = 0; i < npoints; i++)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return totals[a] < totals[b]; });
  quota.assign(npoints, 0);
  const uint64_t floor = std::min<uint64_t>(64, share);
  double left = (double)O.budget;
  size_t i = 0;
  for (; i < npoints; i++) {
    double t = totals[order[i]];
    if (t > std::max<double>(floor, left - (double)floor * (npoints - i - 1)))
      break;
    quota[order[i]] = (uint64_t)t;
    left -= t;
  }
  size_t rest = npoints - i;
  uint64_t each = rest ? (uint64_t)std::max<double>(floor, left / rest) : 0;
  for (; i < npoints; i++)
    quota[order[i]] = std::clamp<uint64_t>(each, 2, 1024);
}

void Engine::generate(size_t point, const CrashPoint &cp) {
  PointCover &pc = cover[point];
  std::vector<std::vector<Choice>> cand;
  if (cp.torn) {
    tornImages(cp, cand, pc);
  } else {
    std::vector<uint32_t> u(und);
    std::sort(u.begin(), u.end(), [&](uint32_t a, uint32_t b) {
      return units[a].addr < units[b].addr;
    });
    double product = 1;
    for (uint32_t ui : u)
      product *= units[ui].hist.size() - units[ui].lb + 1;
    pc.total = product;
    if (product <= (double)perPoint) { // every image
      pc.exhaustive = true;
      std::vector<uint32_t> k(u.size());
      for (size_t i = 0; i < u.size(); i++)
        k[i] = units[u[i]].lb;
      for (;;) {
        std::vector<Choice> cs;
        for (size_t i = 0; i < u.size(); i++)
          if (k[i] < units[u[i]].hist.size())
            cs.push_back({u[i], k[i], (uint32_t)units[u[i]].hist.size()});
        cand.push_back(std::move(cs));
        size_t i = 0;
        for (; i < u.size(); i++) {
          if (++k[i] <= units[u[i]].hist.size())
            break;
          k[i] = units[u[i]].lb;
        }
        if (i == u.size())
          break;
      }
    } else {
      std::mt19937_64 rng(mix(O.seed ^ mix(cp.pos)));
      sample(u, rng, cand);
    }
  }
  for (auto &cs : cand) {
    if (distinct >= O.budget) { // the rest of this point is not explored
      pc.exhaustive = false;
      budgetHit = true;
      return;
    }
    if (O.stopAfter && pc.tried % 32 == 31) {
      collect(false);
      if (failed >= O.stopAfter) {
        pc.exhaustive = false;
        return;
      }
    }
    generated++;
    pc.tried++;
    if (PO)
      close(cs);
    JobInfo info{point, cp.state(), std::move(cs), cp.torn};
    uint64_t h = imageHash(info.choices);
    if (!seen.insert(h).second) {
      if (O.robustness)
        robustDuplicate(h, info);
      continue;
    }
    distinct++;
    submit(info, h);
  }
}

// --robustness: is the image one a crash under strict persistency produces,
// that is, is what it keeps of the recorded store order a prefix of it?
// Writes are ordered by event, and the words of one event by address (a
// crash inside a copy under strict persistency keeps a prefix of it). The
// image fails when some kept write comes after a lost one. Judged on the
// choices that made the image (its persist order), never on its content,
// on the units the checker read (every unit when it recorded none), and
// only on the program's writes: the pmkit runtime's own (allocator,
// journals) follow its own recovery protocol.
void Engine::robustness(const JobInfo &info, const ReadSet *reads) {
  robustChecked++;
  if (!reads)
    wholeImage++;
  Key lost, kept;
  if (!persistPair(info, reads, lost, kept) || kept.first == NONE_EV ||
      kept < lost)
    return;
  if (hbOn && reads && !orderedPair(info, *reads, lost, kept)) {
    unordered++;
    return;
  }
  nonRobust++;
  const Event &a = T.events[lost.first], &b = T.events[kept.first];
  auto key =
      std::make_pair(groupKey(a.loc, lost.first), groupKey(b.loc, kept.first));
  auto [it, fresh] =
      violations.try_emplace(key, Violation{lost.first, kept.first});
  if (fresh)
    it->second.pos = info.pos;
  it->second.images++;
}

void Engine::hbInit() {
  std::unordered_map<uint32_t, uint32_t> dense;
  bool loads = false;
  for (const Event &e : T.events) {
    dense.try_emplace(e.tid, (uint32_t)dense.size());
    loads |= e.kind == PMKIT_EV_LOAD;
  }
  nthr = (uint32_t)dense.size();
  if (nthr < 2 || !loads || nthr > 64)
    return;
  size_t n = T.events.size();
  thrOf.resize(n);
  thrSeq.resize(n);
  std::vector<std::vector<uint32_t>> cur(nthr, std::vector<uint32_t>(nthr));
  std::vector<uint32_t> all(nthr);   // every event recorded so far
  std::vector<uint32_t> spawn(nthr); // ... when a second thread first showed
  bool spawned = false;
  std::vector<uint8_t> started(nthr);
  // word -> its latest user writes, oldest first (at most 4)
  std::unordered_map<uint64_t, std::vector<uint32_t>> lastWrites;
  // Whether write w left, in word a, the bytes load l returned (bytes w did not
  // write count as matching).
  auto wroteWhatWasRead = [&](const Event &w, const Event &l, uint64_t a) {
    uint64_t lo = std::max(a, l.addr), hi = std::min(a + 8, l.addr + l.size);
    for (uint64_t b = lo; b < hi; b++)
      if (b >= w.addr && b < w.addr + w.length() &&
          w.byte(b - w.addr) != (uint8_t)(l.arg >> (8 * (b - l.addr))))
        return false;
    return true;
  };
  auto join = [&](std::vector<uint32_t> &v, const uint32_t *w) {
    for (uint32_t k = 0; k < nthr; k++)
      v[k] = std::max(v[k], w[k]);
  };
  for (size_t i = 0; i < n; i++) {
    const Event &e = T.events[i];
    uint32_t t = dense[e.tid];
    thrOf[i] = t;
    std::vector<uint32_t> &v = cur[t];
    if (!started[t]) {
      if (i && !spawned) {
        spawn = all;
        spawned = true;
      }
      join(v, spawn.data());
      started[t] = 1;
    }
    thrSeq[i] = ++v[t];
    bool reads = e.kind == PMKIT_EV_LOAD || e.kind == PMKIT_EV_RMW;
    bool user = e.writes() && !runtimeLoc[i];
    uint64_t len = e.length();
    if ((reads || user) && e.addr && len)
      for (uint64_t a = e.addr & ~7ull; a < e.addr + len; a += 8) {
        if (reads) {
          auto it = lastWrites.find(a);
          if (it != lastWrites.end()) {
            // A plain store takes its place in the trace before it executes,
            // so a load recorded after it may still have read what was there
            // before (a thread stopped between the two): its value says which
            // write it read. Taking the latest regardless made a reads-from
            // that never happened, and a robustness violation with it
            // (Concurrency Kit's hash set under load, the real-program tier).
            // No match (a partial write): the latest, the stricter choice.
            uint32_t from = it->second.back();
            if (e.kind == PMKIT_EV_LOAD && e.size)
              for (auto w = it->second.rbegin(); w != it->second.rend(); ++w)
                if (wroteWhatWasRead(T.events[*w], e, a)) {
                  from = *w;
                  break;
                }
            if (thrOf[from] != t)
              join(v, &vcs[vcAt[from]]);
          }
        }
        if (user) {
          std::vector<uint32_t> &h = lastWrites[a];
          if (h.size() == 4)
            h.erase(h.begin());
          h.push_back((uint32_t)i);
        }
      }
    if (user) {
      vcAt[(uint32_t)i] = (uint32_t)vcs.size();
      vcs.insert(vcs.end(), v.begin(), v.end());
    }
    join(all, v.data());
  }
  hbOn = true;
}

// Event a happens before write event b (hbInit's relation).
bool Engine::hb(uint32_t a, uint32_t b) const {
  if (thrOf[a] == thrOf[b])
    return a < b;
  auto it = vcAt.find(b);
  return it != vcAt.end() && vcs[it->second + thrOf[a]] >= thrSeq[a];
}

// As persistPair on the words read, per thread: the first lost write of each
// thread and the latest kept write of each; true, with that pair, if some
// thread's first loss happens before another's (or its own) later kept
// write. (If a later loss of a thread happens before a kept write, so does
// the thread's first; if a kept write follows, in its thread, a write that
// a loss happens before, the latest kept of that thread is after it too.)
bool Engine::orderedPair(const JobInfo &info, const ReadSet &reads, Key &lost,
                         Key &kept) {
  std::unordered_map<uint32_t, uint32_t> dev;
  for (const Choice &c : info.choices)
    dev[c.ui] = c.k;
  const Key none{UINT32_MAX, 0};
  std::vector<Key> lostBy(nthr, none), keptBy(nthr, Key{NONE_EV, 0});
  auto keyOf = [&](const Unit &u, uint32_t j) {
    return Key{u.hist[j].ev, u.addr + u.hist[j].off};
  };
  const uint64_t *w = reads.data(), *end = w + reads.size();
  while (w != end) {
    uint64_t ua = *w & ~(uint64_t)(U - 1);
    const uint64_t *next = w;
    while (next != end && (*next & ~(uint64_t)(U - 1)) == ua)
      next++;
    auto found = index.find(ua);
    if (found != index.end()) {
      const Unit &u = units[found->second];
      auto read = [&](const Piece &p) {
        uint64_t lo = u.addr + p.off, hi = lo + p.len;
        for (const uint64_t *x = w; x != next; x++)
          if (*x<hi && * x + 8> lo)
            return true;
        return false;
      };
      uint32_t n =
          (uint32_t)(std::lower_bound(u.hist.begin(), u.hist.end(), info.pos,
                                      [](const Piece &p, size_t pos) {
                                        return p.ev < pos;
                                      }) -
                     u.hist.begin());
      auto it = dev.find(found->second);
      uint32_t k = it == dev.end() ? n : std::min(n, it->second);
      for (uint32_t j = 0; j < n; j++) {
        uint32_t ev = u.hist[j].ev;
        if (runtimeEv(ev) || !read(u.hist[j]))
          continue;
        Key x = keyOf(u, j);
        uint32_t t = thrOf[ev];
        if (j < k) {
          if (keptBy[t].first == NONE_EV || x > keptBy[t])
            keptBy[t] = x;
        } else if (x < lostBy[t]) {
          lostBy[t] = x;
        }
      }
    }
    w = next;
  }
  for (uint32_t i = 0; i < nthr; i++)
    for (uint32_t j = 0; j < nthr; j++)
      if (lostBy[i] != none && keptBy[j].first != NONE_EV &&
          lostBy[i] < keptBy[j] && hb(lostBy[i].first, keptBy[j].first)) {
        lost = lostBy[i];
        kept = keptBy[j];
        return true;
      }
  return false;
}

// The program's first lost write of an image (in store order) and its
// latest kept one, on the units read (every unit without reads); false if
// the image loses none of the program's writes. kept.first is NONE_EV when
// it keeps none.
bool Engine::persistPair(const JobInfo &info, const ReadSet *reads, Key &lost,
                         Key &kept) {
  std::unordered_map<uint32_t, uint32_t> dev;
  for (const Choice &c : info.choices)
    dev[c.ui] = c.k;
  const Key none{UINT32_MAX, 0};
  lost = none, kept = Key{0, 0};
  bool anyKept = false;
  auto keyOf = [&](const Unit &u, uint32_t j) {
    return Key{u.hist[j].ev, u.addr + u.hist[j].off};
  };
  // Only the pieces overlapping a read word of the unit count, when the
  // words are known (w, nw).
  auto consider = [&](uint32_t ui, const uint64_t *w = nullptr, size_t nw = 0) {
    const Unit &u = units[ui];
    auto read = [&](const Piece &p) {
      if (!w)
        return true;
      uint64_t lo = u.addr + p.off, hi = lo + p.len;
      for (size_t i = 0; i < nw; i++)
        if (w[i] < hi && w[i] + 8 > lo)
          return true;
      return false;
    };
    uint32_t n =
        (uint32_t)(std::lower_bound(
                       u.hist.begin(), u.hist.end(), info.pos,
                       [](const Piece &p, size_t pos) { return p.ev < pos; }) -
                   u.hist.begin());
    auto it = dev.find(ui);
    uint32_t k = it == dev.end() ? n : std::min(n, it->second);
    for (uint32_t j = k; j-- > 0;)
      if (!runtimeEv(u.hist[j].ev) && read(u.hist[j])) {
        Key x = keyOf(u, j);
        if (!anyKept || x > kept)
          kept = x, anyKept = true;
        break;
      }
    for (uint32_t j = k; j < n; j++)
      if (!runtimeEv(u.hist[j].ev) && read(u.hist[j])) {
        lost = std::min(lost, keyOf(u, j));
        break;
      }
  };
  if (reads) {
    const uint64_t *w = reads->data(), *end = w + reads->size();
    while (w != end) {
      uint64_t ua = *w & ~(uint64_t)(U - 1);
      const uint64_t *next = w;
      while (next != end && (*next & ~(uint64_t)(U - 1)) == ua)
        next++;
      auto it = index.find(ua);
      if (it != index.end())
        consider(it->second, w, (size_t)(next - w));
      w = next;
    }
  } else {
    for (const Choice &c : info.choices)
      consider(c.ui);
    // The latest kept write outside the changed units: walk back over the
    // program's writes; each one passed over lost all its words, so the
    // walk is as long as the image's losses.
    auto from = std::lower_bound(userWrites.begin(), userWrites.end(),
                                 (uint32_t)info.pos);
    for (auto w = from; w != userWrites.begin() && lost != none;) {
      uint32_t ev = *--w;
      if (anyKept && kept.first > ev)
        break;
      if (ev < lost.first)
        break; // every write from here on is before the first lost one
      const Event &e = T.events[ev];
      uint64_t len = e.length(), top = 0;
      bool keptHere = false;
      for (uint64_t a = e.addr & ~(uint64_t)(U - 1); a < e.addr + len; a += U) {
        auto it = index.find(a);
        if (it == index.end() || dev.count(it->second))
          continue; // a changed unit: considered above
        keptHere = true;
        top = std::min(a + U, e.addr + len) - 1;
      }
      if (keptHere) {
        Key x{ev, top & ~7ull};
        if (!anyKept || x > kept)
          kept = x, anyKept = true;
        break;
      }
    }
  }
  if (!anyKept)
    kept = Key{NONE_EV, 0};
  return lost != none;
}

// An image whose content was already checked: judged with the reads of
// that check, now or when it comes back.
void Engine::robustDuplicate(uint64_t h, const JobInfo &info) {
  auto it = robustReads.find(h);
  if (it == robustReads.end())
    robustWaiting[h].push_back(info);
  else
    robustness(info, it->second.known ? &it->second.words : nullptr);
}

void Engine::robustResult(const JobInfo &info, const Result &r) {
  RobustReads &rr = robustReads[info.hash];
  rr.known = r.readsKnown;
  if (r.readsKnown) {
    rr.words = r.reads; // 8-byte aligned
    std::sort(rr.words.begin(), rr.words.end());
    rr.words.erase(std::unique(rr.words.begin(), rr.words.end()),
                   rr.words.end());
  }
  const ReadSet *reads = rr.known ? &rr.words : nullptr;
  robustness(info, reads);
  auto w = robustWaiting.find(info.hash);
  if (w != robustWaiting.end()) {
    for (const JobInfo &d : w->second)
      robustness(d, reads);
    robustWaiting.erase(w);
  }
}

std::string Engine::violationText(const Violation &v) const {
  const Event &a = T.events[v.lostEv], &b = T.events[v.keptEv];
  std::string A = place(a.loc) + " (thread " + std::to_string(a.tid) + ")";
  std::string B = place(b.loc) + " (thread " + std::to_string(b.tid) + ")";
  if (v.lostEv == v.keptEv)
    return "the " + std::string(kindName(a.kind)) + " of " +
           std::to_string(a.length()) + " bytes at " + A +
           " can persist in part: split it, or make its parts independent";
  // Did the writer flush the line after the lost write, before the later
  // one? Then only a fence was missing.
  bool flushed = false;
  uint64_t line = a.addr & ~63ull;
  for (uint32_t i = v.lostEv + 1; i < v.keptEv && !flushed; i++) {
    const Event &e = T.events[i];
    flushed =
        e.kind == PMKIT_EV_FLUSH && e.tid == a.tid && (e.addr & ~63ull) == line;
  }
  return "the " + std::string(kindName(a.kind)) + " at " + A +
         " can be lost while the later " + kindName(b.kind) + " at " + B +
         " persisted: it needs " +
         (flushed ? "a fence" : "a flush and a fence") + " before " +
         (a.tid == b.tid ? "the later one" : "the other thread's store");
}

std::string Engine::operationAt(size_t pos) const {
  // The innermost mark open in any thread at pos (scan back).
  std::vector<int> closed(T.threads + 1, 0);
  for (size_t i = std::min(pos, T.events.size()); i-- > 0;) {
    const Event &e = T.events[i];
    if (e.kind == PMKIT_EV_MARK_END)
      closed[e.tid]++;
    else if (e.kind == PMKIT_EV_MARK_BEGIN) {
      if (closed[e.tid] == 0)
        return T.markText((uint32_t)e.arg) + " (thread " +
               std::to_string(e.tid) + ")";
      closed[e.tid]--;
    }
  }
  return "";
}

std::string Engine::describeJob(const JobInfo &info) const {
  if (!info.torn)
    return describePoint(info.pos);
  size_t ev = info.pos - 1;
  const Event &e = T.events[ev];
  return "in the middle of event " + std::to_string(ev) + " of " +
         std::to_string(T.events.size()) + ": " + kindName(e.kind) + " of " +
         std::to_string(e.length()) + " bytes at " + place(e.loc) +
         " (thread " + std::to_string(e.tid) + ")";
}

std::string Engine::describePoint(size_t pos) const {
  if (pos >= T.events.size())
    return "at the end of the run";
  const Event &e = T.events[pos];
  return "before event " + std::to_string(pos) + " of " +
         std::to_string(T.events.size()) + ": " + kindName(e.kind) + " at " +
         place(e.loc) + " (thread " + std::to_string(e.tid) + ")";
}

// Minimises a failure's lost writes (delta debugging): tries putting back
// chunks of the lost units, halving the chunks when none can go, then each
// unit alone, then each remaining unit's earlier writes one at a time (keep
// more of it); at most 256 checks. Not under the arp model (see below).
void Engine::minimise(Failure &f) {
  // The arp model's closure (close()) works on the walk's state at the
  // crash point, and the walk is past every point by now: a "minimal" image
  // it no longer closes could be one the model does not allow. Its
  // failures are shown as found, closed when they were generated.
  if (PO)
    return;
  std::vector<Choice> cs = f.info.choices;
  unsigned budget = 256;
  auto fails = [&](const std::vector<Choice> &trial) {
    if (!budget)
      return false;
    budget--;
    JobInfo info{f.info.point, f.info.pos, trial, f.info.torn};
    Result r = checkNow(info);
    if (r.ok || r.cannotRun)
      return false;
    f.result = std::move(r);
    return true;
  };
  for (size_t n = 2; cs.size() >= 2 && budget;) {
    size_t chunk = (cs.size() + n - 1) / n;
    bool removed = false;
    for (size_t start = 0; start < cs.size() && budget; start += chunk) {
      std::vector<Choice> trial(cs.begin(), cs.begin() + (long)start);
      trial.insert(trial.end(),
                   cs.begin() + (long)std::min(cs.size(), start + chunk),
                   cs.end());
      if (fails(trial)) {
        cs = std::move(trial);
        n = std::max<size_t>(2, n - 1);
        removed = true;
        break;
      }
    }
    if (!removed) {
      if (chunk == 1)
        break;
      n = std::min(cs.size(), 2 * n);
    }
  }
  if (cs.size() == 1 && budget) { // the last one: is the image fine without?
    if (fails({}))
      cs.clear();
  }
  for (size_t i = 0; i < cs.size() && budget; i++)
    while (cs[i].k + 1 < cs[i].n && budget) { // keep one more of its writes
      std::vector<Choice> trial(cs);
      trial[i].k++;
      if (!fails(trial))
        break;
      cs = std::move(trial);
    }
  f.info.choices = std::move(cs);
}

// The program's write that persisted and made a minimal failure's loss
// matter: losing, with the failure's writes, the program's later writes up
// to and including it makes the image pass (a binary search over them, at
// most 24 checks). NONE_EV if there is none (or the arp model, whose images
// must stay closed).
uint32_t Engine::culprit(const Failure &f) {
  Key lost, kept;
  if (PO || !persistPair(f.info, nullptr, lost, kept))
    return NONE_EV;
  auto from =
      std::upper_bound(userWrites.begin(), userWrites.end(), lost.first);
  auto to = std::lower_bound(userWrites.begin(), userWrites.end(),
                             (uint32_t)f.info.pos);
  if (from >= to)
    return NONE_EV;
  std::vector<uint32_t> later(from, to);
  auto passesLosing = [&](size_t p) { // the failure, and later[0..p) lost
    std::map<uint32_t, uint32_t> k;
    for (const Choice &c : f.info.choices)
      k[c.ui] = c.k;
    for (size_t i = 0; i < p; i++) {
      const Event &e = T.events[later[i]];
      for (uint64_t a = e.addr & ~(uint64_t)(U - 1); a < e.addr + e.length();
           a += U) {
        auto it = index.find(a);
        if (it == index.end())
          continue;
        const Unit &u = units[it->second];
        for (uint32_t j = u.lbAt(f.info.pos); j < u.hist.size(); j++)
          if (u.hist[j].ev == later[i]) {
            auto [kt, fresh] = k.try_emplace(it->second, j);
            if (!fresh)
              kt->second = std::min(kt->second, j);
            break;
          }
      }
    }
    std::vector<Choice> cs;
    for (auto [ui, kk] : k) {
      uint32_t n = (uint32_t)std::count_if(
          units[ui].hist.begin(), units[ui].hist.end(),
          [&](const Piece &pc) { return pc.ev < f.info.pos; });
      if (kk < n)
        cs.push_back({ui, kk, n});
    }
    JobInfo info{f.info.point, f.info.pos, cs, f.info.torn};
    Result r = checkNow(info);
    return r.ok && !r.cannotRun;
  };
  // Losing later[0..lo) still fails, losing later[0..hi) passes.
  size_t lo = 0, hi = later.size();
  if (!passesLosing(hi))
    return DURABLE_EV; // what makes the loss matter can no longer be lost
  for (unsigned checks = 1; hi - lo > 1 && checks < 24; checks++) {
    size_t mid = lo + (hi - lo) / 2;
    if (passesLosing(mid))
      hi = mid;
    else
      lo = mid;
  }
  return hi - lo == 1 ? later[hi - 1] : NONE_EV;
}

// The failing images by the program's first lost write and the latest
// write it kept after it (the loss that made the later write dangerous).
void Engine::groupFailure(const JobInfo &info) {
  Key lost, kept;
  uint32_t lostEv = NONE_EV, keptEv = NONE_EV;
  if (persistPair(info, nullptr, lost, kept)) {
    lostEv = lost.first;
    if (kept.first != NONE_EV && kept > lost)
      keptEv = kept.first;
  }
  auto keyOf = [&](uint32_t ev) {
    return ev == NONE_EV ? std::string() : groupKey(T.events[ev].loc, ev);
  };
  auto [it, fresh] =
      failGroups.try_emplace({keyOf(lostEv), keyOf(keptEv)}, FailGroup{});
  if (fresh)
    it->second.lostEv = lostEv, it->second.keptEv = keptEv;
  it->second.images++;
}

// Where a user looks for an event: the first frame of its call stack in
// the program's code, and the innermost frame when that is pmkit's own
// ("t.c:30:5 via pmkit:runtime/core/flush.c:171").
std::string Engine::place(uint32_t loc) const {
  std::string user = T.userText(loc), inner = T.locText(loc);
  return user == inner ? user : user + " via " + inner;
}

// What groups failures and violations: the event's source line in the
// program, without the field it names (one line writing rec.v[5] and
// rec.v[6] is one group); the event itself when it has no location.
std::string Engine::groupKey(uint32_t loc, uint32_t ev) const {
  if (!loc)
    return "#" + std::to_string(ev);
  std::string u = T.userText(loc);
  return u.substr(0, u.find(' '));
}

// Where in the program a crash point inside the pmkit runtime was reached,
// for a trace without call stacks (format 3 and older, or calls nested too
// deep): the latest event of the same thread at a location of the program.
// With a call stack, place() names it and this returns "".
std::string Engine::programSite(size_t pos) const {
  if (pos >= T.events.size() || !runtimeLoc[pos])
    return "";
  if (const Trace::Site *st = T.site(T.events[pos].loc); st && st->user)
    return "";
  uint32_t tid = T.events[pos].tid;
  for (size_t i = pos, steps = 0; i-- > 0 && steps < 1000000; steps++) {
    const Event &e = T.events[i];
    if (e.tid == tid && e.loc && !runtimeLoc[i])
      return T.userText(e.loc);
  }
  return "";
}

void Engine::progress(bool final) {
  if (!O.progress)
    return;
  auto now = std::chrono::steady_clock::now();
  if (!final && now - lastProgress < std::chrono::milliseconds(200))
    return;
  lastProgress = now;
  double secs = std::chrono::duration<double>(now - start).count();
  size_t done = 0;
  for (; done < pointsList.size() && pointsList[done].state() < at; done++)
    ;
  double frac = pointsList.empty() ? 1 : (double)done / pointsList.size();
  int w = 24, f = (int)(frac * w);
  fprintf(stderr,
          "\r[%.*s%*s] %3.0f%%  points %zu/%zu  checked %llu  "
          "failed %llu  %.0f images/s ",
          f, "########################", w - f, "", frac * 100, done,
          pointsList.size(), (unsigned long long)checked,
          (unsigned long long)failed, secs > 0 ? checked / secs : 0.0);
  if (final)
    fprintf(stderr, "\n");
  fflush(stderr);
}

int Engine::run() {
  if (T.pools.empty())
    throw Error("the traced run registered no pool: nothing to explore "
                "(is the program linked with libpmkit-trace?)");
  start = lastProgress = std::chrono::steady_clock::now();
  unsigned nslots = std::max(1u, O.jobs);
  for (unsigned s = 0; s < nslots; s++)
    slots.push_back(makeChecker(T, O.checker, s));

  // The image of the complete run must pass, or the checker is broken.
  {
    JobInfo all{0, T.events.size(), {}};
    Result r = checkNow(all);
    if (!r.ok)
      throw Error(
          std::string("the checker rejects the image of the complete run (") +
          r.status + (r.output.empty() ? ")" : "): " + r.output) +
          "; fix the checker or the program first");
  }

  pointsList = crashPoints();
  allPoints = pointsList.size();
  if (pointsList.empty())
    throw Error(
        "no crash point to explore (--points " +
        (O.points.empty() ? std::string(M->defaultPoints()) : O.points) +
        (O.mark.empty() ? "" : ", --mark " + O.mark) +
        "): nothing would be checked");
  if (pointsList.size() > std::max<uint64_t>(1, O.budget / 2)) {
    if (O.requireExhaustive)
      throw Error("--require-exhaustive: the trace has " +
                  std::to_string(allPoints) +
                  " crash points, more than half of --budget " +
                  std::to_string(O.budget) +
                  ", so only a sample of them would be explored; raise "
                  "--budget or narrow the points (--points, --mark)");
    std::mt19937_64 rng(mix(O.seed));
    std::vector<CrashPoint> pick(pointsList);
    std::shuffle(pick.begin(), pick.end(), rng);
    pick.resize(std::max<uint64_t>(1, O.budget / 2));
    std::sort(pick.begin(), pick.end(),
              [](const CrashPoint &a, const CrashPoint &b) {
                return a.pos != b.pos ? a.pos < b.pos : a.torn < b.torn;
              });
    pointsList = pick;
  }
  npoints = pointsList.size();
  cover.assign(npoints, PointCover{});
  // Share the budget out so that late crash points get images too.
  planQuotas();

  std::vector<std::thread> workers;
  for (unsigned s = 0; s < nslots; s++)
    workers.emplace_back([this, s] { workerLoop(s); });
  auto stop = [&] {
    {
      std::lock_guard<std::mutex> l(mu);
      closing = true;
      queue.clear();
    }
    cv.notify_all();
    for (auto &w : workers)
      w.join();
  };
  try {
    for (size_t p = 0; p < pointsList.size(); p++) {
      advance(pointsList[p].state());
      perPoint = quota[p];
      if (distinct < O.budget && !(O.stopAfter && failed >= O.stopAfter))
        generate(p, pointsList[p]);
      else
        cover[p].skipped = true;
      collect(false);
      progress(false);
      if (O.requireExhaustive && !cover[p].exhaustive) {
        collect(true);
        if (!failed)
          throw Error(
              "--require-exhaustive: " +
              describeJob({p, pointsList[p].state(), {}, pointsList[p].torn}) +
              " allows " + approx(cover[p].total) + " images, more than the " +
              std::to_string(quota[p]) + " this run may check there" +
              (budgetHit ? " (the budget ran out)" : "") +
              "; raise --per-point and --budget, or narrow the points");
      }
    }
    collect(true);
  } catch (...) {
    stop();
    throw;
  }
  stop();
  progress(true);
  advance(T.events.size());

  // Minimise failures and show those that differ in what was lost (the
  // program's source lines). Distinct bugs come first: one failure of each
  // first lost line, then one of each group (first lost write, latest kept
  // after it), then the rest.
  // In the order of the trace and then of the writes each image lost, not
  // of the checks' completion nor of the images' content (a pool's header
  // differs from run to run): the same run reports the same failures first.
  auto lostOrder = [](const JobInfo &j) {
    std::vector<std::pair<uint32_t, uint32_t>> v;
    for (const Choice &c : j.choices)
      v.emplace_back(c.ui, c.k);
    return v;
  };
  std::stable_sort(failures.begin(), failures.end(),
                   [&](const Failure &a, const Failure &b) {
                     if (a.info.pos != b.info.pos || a.info.torn != b.info.torn)
                       return std::tie(a.info.pos, a.info.torn) <
                              std::tie(b.info.pos, b.info.torn);
                     return lostOrder(a.info) < lostOrder(b.info);
                   });
  std::vector<size_t> order;
  {
    std::set<std::string> seenLost;
    std::set<std::pair<std::string, std::string>> seenGroups;
    std::vector<size_t> second, rest;
    for (size_t i = 0; i < failures.size(); i++) {
      Key lost, kept;
      std::pair<std::string, std::string> g;
      if (persistPair(failures[i].info, nullptr, lost, kept))
        g = {groupKey(T.events[lost.first].loc, lost.first),
             kept.first == NONE_EV || kept < lost
                 ? std::string()
                 : groupKey(T.events[kept.first].loc, kept.first)};
      bool newGroup = seenGroups.insert(g).second;
      if (seenLost.insert(g.first).second)
        order.push_back(i);
      else
        (newGroup ? second : rest).push_back(i);
    }
    order.insert(order.end(), second.begin(), second.end());
    order.insert(order.end(), rest.begin(), rest.end());
  }
  std::set<std::vector<std::string>> shownSigs;
  std::vector<Failure> shown;
  size_t tried = 0;
  for (size_t i : order) {
    Failure &f = failures[i];
    if (shown.size() >= O.maxReports || tried >= 4 * (size_t)O.maxReports)
      break;
    tried++;
    minimise(f);
    std::vector<std::string> sig;
    for (const Choice &c : f.info.choices)
      for (uint32_t k = c.k; k < c.n; k++) {
        uint32_t ev = units[c.ui].hist[k].ev;
        sig.push_back(groupKey(T.events[ev].loc, ev));
      }
    std::sort(sig.begin(), sig.end());
    sig.erase(std::unique(sig.begin(), sig.end()), sig.end());
    if (shownSigs.insert(sig).second)
      shown.push_back(f);
  }
  failures = std::move(shown);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  report(secs);
  if (failed || nonRobust)
    return 1;
  if (!warnings.empty()) {
    fprintf(stderr, "pmkit explore: the trace missed writes to a pool: no "
                    "verdict (see the warning)\n");
    return 2;
  }
  return 0;
}

// What a run that found no failure did not cover, in words.
std::string Engine::gaps(size_t exhaustivePts, size_t sampledPts,
                         size_t skippedPts) const {
  std::string g = std::to_string(exhaustivePts) + " of " +
                  std::to_string(allPoints) +
                  " crash points enumerated exhaustively";
  if (sampledPts)
    g += ", " + std::to_string(sampledPts) + " sampled";
  if (skippedPts)
    g += ", " + std::to_string(skippedPts) + " skipped (budget spent)";
  if (npoints != allPoints)
    g += ", " + std::to_string(allPoints - npoints) +
         " not explored (points sampled)";
  return g + "; --require-exhaustive refuses such a run";
}

void Engine::report(double secs) {
  std::string dir = O.saveDir.empty() ? "pmkit-explore-failures" : O.saveDir;
  struct stat sb;
  if (!failures.empty() && mkdir(dir.c_str(), 0755) != 0 &&
      !(errno == EEXIST && stat(dir.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)))
    throw Error("cannot create the directory " + dir +
                " for failing images (--save-dir)");
  std::vector<std::string> images, repro;
  std::vector<uint32_t> culprits;
  for (const Failure &f : failures)
    culprits.push_back(culprit(f));
  // An image never replaces one already in the folder: an earlier run's
  // reproduce lines keep naming the images they printed. Each is the first
  // free fail-K.pool, taken with O_EXCL (two runs may share the folder).
  unsigned k = 0;
  for (size_t i = 0; i < failures.size(); i++) {
    std::string path;
    for (;;) {
      path = dir + "/fail-" + std::to_string(++k) + ".pool";
      int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (fd >= 0) {
        ::close(fd);
        break;
      }
      if (errno != EEXIST)
        throw Error("cannot create " + path + ": " + strerror(errno));
    }
    Job j = makeJob(failures[i].info.pos, failures[i].info.choices);
    slots[0]->save(j, path);
    images.push_back(path);
    repro.push_back(slots[0]->reproduce(path));
  }

  std::string pts = O.points.empty() ? M->defaultPoints() : O.points;
  printf("pmkit explore: model %s, crash points at %s%s\n", M->name(),
         pts.c_str(), O.mark.empty() ? "" : (", inside " + O.mark).c_str());
  printf("  trace:        %zu events, %u thread%s, %zu pool%s", T.events.size(),
         T.threads, T.threads == 1 ? "" : "s", pools.size(),
         pools.size() == 1 ? "" : "s");
  for (const PoolState &s : pools)
    printf(" (%s, %.1f MiB)", s.pool->path.c_str(), s.pool->size / 1048576.0);
  // Coverage: which points were enumerated, which sampled, which skipped.
  size_t exhaustivePts = 0, sampledPts = 0, skippedPts = 0;
  double sampledTotal = 0, allTotal = 0;
  uint64_t sampledTried = 0;
  for (const PointCover &c : cover) {
    allTotal += c.total;
    if (c.skipped)
      skippedPts++;
    else if (c.exhaustive)
      exhaustivePts++;
    else
      sampledPts++, sampledTotal += c.total, sampledTried += c.tried;
  }
  bool exhaustive = npoints == allPoints && exhaustivePts == npoints;
  printf("\n  crash points: %zu of %zu explored", npoints, allPoints);
  if (npoints != allPoints)
    printf(" (a sample, seed %llu)", (unsigned long long)O.seed);
  if (redundantPoints)
    printf(" (and %zu with no write since the point before, whose images "
           "are among that point's)",
           redundantPoints);
  printf("; %zu enumerated exhaustively, %zu sampled", exhaustivePts,
         sampledPts);
  uint64_t qmin = UINT64_MAX, qmax = 0;
  for (size_t p = 0; p < npoints; p++)
    if (!cover[p].exhaustive && !cover[p].skipped)
      qmin = std::min(qmin, quota[p]), qmax = std::max(qmax, quota[p]);
  if (skippedPts)
    printf(", %zu skipped (%s)", skippedPts,
           budgetHit ? "budget spent" : "--stop-after reached");
  if (sampledPts) // ("more than 1e308" is not "about")
    printf("\n  sampled:      %llu images tried of %s%s the sampled "
           "points allow (%llu to %llu a point)",
           (unsigned long long)sampledTried,
           std::isinf(sampledTotal) ? "" : "about ",
           approx(sampledTotal).c_str(), (unsigned long long)qmin,
           (unsigned long long)qmax);
  printf("\n  images:       %llu generated, %llu distinct, %llu checked, "
         "%llu failed%s\n",
         (unsigned long long)generated, (unsigned long long)distinct,
         (unsigned long long)checked, (unsigned long long)failed,
         budgetHit ? " (budget reached)" : "");
  printf("  time:         %.2f s (%.0f images/s, %u job%s)\n", secs,
         secs > 0 ? checked / secs : 0.0, (unsigned)slots.size(),
         slots.size() == 1 ? "" : "s");
  for (const std::string &w : warnings)
    printf("  warning: %s\n", w.c_str());

  std::string js =
      "{\n  \"model\": " + jsonStr(M->name()) +
      ",\n  \"points\": " + jsonStr(pts) +
      ",\n  \"events\": " + std::to_string(T.events.size()) +
      ",\n  \"threads\": " + std::to_string(T.threads) +
      ",\n  \"crash_points\": " + std::to_string(npoints) +
      ",\n  \"crash_points_total\": " + std::to_string(allPoints) +
      ",\n  \"coverage\": {\"exhaustive\": " + (exhaustive ? "true" : "false") +
      ", \"points_total\": " + std::to_string(allPoints) +
      ", \"points_explored\": " + std::to_string(npoints) +
      ", \"points_exhaustive\": " + std::to_string(exhaustivePts) +
      ", \"points_sampled\": " + std::to_string(sampledPts) +
      ", \"points_skipped\": " + std::to_string(skippedPts) +
      ", \"points_redundant\": " + std::to_string(redundantPoints) +
      ", \"sampled_images_tried\": " + std::to_string(sampledTried) +
      ", \"sampled_images_estimate\": " + approxJson(sampledTotal) +
      ", \"images_estimate\": " + approxJson(allTotal) +
      ", \"per_point\": " + std::to_string(O.perPoint) +
      ", \"budget\": " + std::to_string(O.budget) +
      ", \"budget_reached\": " + (budgetHit ? "true" : "false") + "}" +
      ",\n  \"images_generated\": " + std::to_string(generated) +
      ",\n  \"images_distinct\": " + std::to_string(distinct) +
      ",\n  \"images_checked\": " + std::to_string(checked) +
      ",\n  \"images_failed\": " + std::to_string(failed) +
      ",\n  \"seconds\": " + std::to_string(secs) +
      ",\n  \"images_per_second\": " +
      std::to_string(secs > 0 ? checked / secs : 0.0) +
      ",\n  \"jobs\": " + std::to_string(slots.size()) +
      ",\n  \"seed\": " + std::to_string(O.seed) + ",\n  \"failures\": [";
  for (size_t i = 0; i < failures.size(); i++) {
    const Failure &f = failures[i];
    std::string op = operationAt(f.info.pos);
    std::string site = programSite(f.info.torn ? f.info.pos - 1 : f.info.pos);
    const size_t at = f.info.torn ? f.info.pos - 1 : f.info.pos;
    std::string stack =
        at < T.events.size() ? T.stackText(T.events[at].loc) : "";
    printf("\nFAIL %zu: crash %s%s%s\n", i + 1, describeJob(f.info).c_str(),
           site.empty() ? "" : (", reached from " + site).c_str(),
           op.empty() ? "" : (", during " + op).c_str());
    if (stack.find(" <- ") != std::string::npos)
      printf("  call stack: %s\n", stack.c_str());
    printf("  lost writes (a minimal set; every other write before the crash "
           "persisted):\n");
    js += std::string(i ? "," : "") +
          "\n    {\"position\": " + std::to_string(f.info.pos) +
          ", \"crash_point\": " + jsonStr(describeJob(f.info)) +
          ", \"call_stack\": " + jsonStr(stack) +
          ", \"operation\": " + jsonStr(op) + ", \"lost\": [";
    bool firstLost = true;
    for (const Choice &c : f.info.choices) {
      const Unit &u = units[c.ui];
      for (uint32_t k = c.k; k < c.n; k++) {
        const Piece &pc = u.hist[k];
        const Event &e = T.events[pc.ev];
        const Pool *pool = T.poolOf(u.addr);
        uint64_t a = u.addr + pc.off;
        std::string where = pool ? "pool " + std::to_string(pool->id) + "+" +
                                       hex(a - pool->base)
                                 : hex(a);
        std::string val;
        if (e.kind != PMKIT_EV_MEMSET && !e.data && e.size <= 8)
          val = " = " + hex(e.arg);
        printf("    %s  thread %u  %s of %llu bytes at %s%s\n",
               place(e.loc).c_str(), e.tid, kindName(e.kind),
               (unsigned long long)e.length(), where.c_str(), val.c_str());
        js += std::string(firstLost ? "" : ", ") +
              "{\"event\": " + std::to_string(pc.ev) +
              ", \"loc\": " + jsonStr(T.userText(e.loc)) +
              ", \"stack\": " + jsonStr(T.stackText(e.loc)) +
              ", \"thread\": " + std::to_string(e.tid) +
              ", \"kind\": " + jsonStr(kindName(e.kind)) +
              ", \"addr\": " + jsonStr(where) +
              ", \"length\": " + std::to_string(e.length()) + "}";
        firstLost = false;
      }
    }
    if (f.info.choices.empty())
      printf("    none: the fully persisted image at this point fails\n");
    std::string later;
    if (culprits[i] == DURABLE_EV)
      printf("  the later writes that make this loss matter are already "
             "durable here (losing every later write that may still be lost "
             "fails too)\n");
    if (uint32_t ev = culprits[i]; ev < DURABLE_EV) {
      const Event &e = T.events[ev];
      later = place(e.loc) + "  thread " + std::to_string(e.tid) + "  " +
              kindName(e.kind) + " of " + std::to_string(e.length()) + " bytes";
      printf("  persisted later, and made the loss matter (losing it too "
             "passes the check):\n    %s\n",
             later.c_str());
    }
    printf("  checker: %s%s\n", f.result.status.c_str(),
           f.result.output.empty() ? "" : (": " + f.result.output).c_str());
    printf("  image: %s\n  reproduce: %s\n", images[i].c_str(),
           repro[i].c_str());
    js += "], \"persisted_later\": " + jsonStr(later) +
          ", \"checker\": " + jsonStr(f.result.status) +
          ", \"output\": " + jsonStr(f.result.output) +
          ", \"image\": " + jsonStr(images[i]) +
          ", \"reproduce\": " + jsonStr(repro[i]) + "}";
  }
  if (failed > failures.size())
    printf("\n(%llu more failing images not shown)\n",
           (unsigned long long)(failed - failures.size()));
  // Every failing image, grouped by what it lost first and what it kept.
  std::vector<const FailGroup *> gs;
  for (auto &[k, g] : failGroups)
    gs.push_back(&g);
  std::stable_sort(gs.begin(), gs.end(),
                   [](const FailGroup *a, const FailGroup *b) {
                     return a->images > b->images;
                   });
  auto evText = [&](uint32_t ev) {
    if (ev == NONE_EV)
      return std::string("-");
    const Event &e = T.events[ev];
    return T.userText(e.loc) + " (thread " + std::to_string(e.tid) + ")";
  };
  if (!gs.empty())
    printf("\nfailing images by first lost write -> latest write kept after "
           "it:\n");
  js += "\n  ],\n  \"failure_groups\": [";
  for (size_t i = 0; i < gs.size(); i++) {
    if (i < 10)
      printf("  %6llu  %s\n", (unsigned long long)gs[i]->images,
             gs[i]->lostEv == NONE_EV
                 ? "no write lost (the writes before the crash point, all "
                   "persisted, fail the check: the point itself is the bug)"
                 : (evText(gs[i]->lostEv) + " -> " +
                    (gs[i]->keptEv == NONE_EV ? "no later write kept"
                                              : evText(gs[i]->keptEv)))
                       .c_str());
    js += std::string(i ? ", " : "") +
          "{\"images\": " + std::to_string(gs[i]->images) +
          ", \"lost\": " + jsonStr(evText(gs[i]->lostEv)) +
          ", \"kept\": " + jsonStr(evText(gs[i]->keptEv)) + "}";
  }
  if (gs.size() > 10)
    printf("  (%zu more groups in the JSON report)\n", gs.size() - 10);
  js += "],\n  \"robustness\": ";
  if (!O.robustness) {
    js += "null";
  } else {
    printf("\nrobustness: %llu of %llu crash images no strict-persistency "
           "execution produces (each image as the writes it keeps and loses, "
           "%llu distinct contents; judged on %s%s)\n",
           (unsigned long long)nonRobust, (unsigned long long)robustChecked,
           (unsigned long long)distinct,
           wholeImage ? "the whole image: the checker recorded no reads"
                      : "the locations the checker read",
           hbOn       ? "; threads ordered by happens-before: program order, "
                        "reads of a word another thread wrote, the set-up before "
                        "the threads"
           : nthr > 1 ? "; threads ordered as recorded: the trace has no "
                        "loads to find happens-before with (--trace-loads)"
                      : "");
    if (unordered)
      printf("  %llu more keep a write of one thread while losing an earlier "
             "write of another that no recorded synchronisation orders before "
             "it (not violations: strict persistency may order the two either "
             "way; synchronisation through memory the trace does not record, "
             "a lock in DRAM, is not seen)\n",
             (unsigned long long)unordered);
    std::vector<const Violation *> vs;
    for (auto &[k, v] : violations)
      vs.push_back(&v);
    std::sort(vs.begin(), vs.end(), [](const Violation *x, const Violation *y) {
      return x->images > y->images;
    });
    js += "{\"images\": " + std::to_string(robustChecked) +
          ", \"violating\": " + std::to_string(nonRobust) +
          ", \"whole_image\": " + (wholeImage ? "true" : "false") +
          ", \"happens_before\": " + (hbOn ? "true" : "false") +
          ", \"unordered\": " + std::to_string(unordered) +
          ", \"violations\": [";
    for (size_t i = 0; i < vs.size(); i++) {
      std::string text = violationText(*vs[i]);
      if (i < 20)
        printf("  %s [%llu image%s; first crash %s]\n", text.c_str(),
               (unsigned long long)vs[i]->images, vs[i]->images == 1 ? "" : "s",
               describePoint(vs[i]->pos).c_str());
      js += std::string(i ? ", " : "") + "{\"text\": " + jsonStr(text) +
            ", \"lost\": " + jsonStr(T.userText(T.events[vs[i]->lostEv].loc)) +
            ", \"kept\": " + jsonStr(T.userText(T.events[vs[i]->keptEv].loc)) +
            ", \"images\": " + std::to_string(vs[i]->images) + "}";
    }
    if (vs.size() > 20)
      printf("  (%zu more pairs in the JSON report)\n", vs.size() - 20);
    js += "]}";
  }
  // An arp-mode program (its trace has acquires, releases or sequence
  // points) checked under another model is checked as this build orders its
  // writes, which is more than ARP promises; under the arp model, the
  // program's own write-backs (a build lowered by the arp pass writes back
  // every store) persist writes earlier than ARP requires. Either way a
  // release bug can pass, and an ok must say what it covered.
  size_t syncs = 0, flushes = 0;
  for (size_t i = 0; i < T.events.size(); i++) {
    uint8_t k = T.events[i].kind;
    if (k == PMKIT_EV_ACQUIRE || k == PMKIT_EV_RELEASE ||
        k == PMKIT_EV_SEQPOINT)
      syncs++;
    else if (k == PMKIT_EV_FLUSH && !runtimeLoc[i])
      flushes++;
  }
  const char *rebuild = "to check the language's rules, explore a build "
                        "without the arp pass (pmkit c++ --trace, no "
                        "--mode=arp) with --model arp";
  std::string arpNote;
  const char *scope = "";
  if (syncs && std::string(M->name()) != "arp") {
    arpNote = "the trace holds " + std::to_string(syncs) +
              " acquires, releases and sequence points (an arp-mode "
              "program): model " +
              M->name() +
              " checks it as this build orders its writes, which is more "
              "than ARP promises, so a release bug (a relaxed unlock, a "
              "missing sequence point) can pass here; " +
              rebuild;
    scope = " (as this build orders writes, not under ARP)";
  } else if (syncs && flushes) {
    arpNote = "the trace holds " + std::to_string(flushes) +
              " write-backs of the program's own: under the arp model they "
              "persist writes earlier than ARP requires (a build lowered by "
              "the arp pass writes back every store), so a release bug can "
              "pass here; " +
              rebuild;
    scope = " (with the program's write-backs, not ARP alone)";
  }
  if (!arpNote.empty())
    printf("\nnote: %s\n", arpNote.c_str());
  if (failed)
    printf("\nresult: FAILED: %llu of %llu crash images are inconsistent\n",
           (unsigned long long)failed, (unsigned long long)checked);
  else if (nonRobust)
    printf("\nresult: FAILED: no checked image is inconsistent, but %llu of "
           "%llu crash images are not robust\n",
           (unsigned long long)nonRobust, (unsigned long long)robustChecked);
  else if (!warnings.empty())
    printf("\nresult: INCOMPLETE: no failure in %llu images, but the trace "
           "missed writes to a pool (the warning above): the images explored "
           "are not the program's, so this is no verdict\n",
           (unsigned long long)checked);
  else if (exhaustive)
    printf("\nresult: ok (exhaustive)%s: every crash image of all %zu crash "
           "points is consistent (%llu distinct images checked)\n",
           scope, allPoints, (unsigned long long)checked);
  else
    printf("\nresult: no failure in %llu sampled images (not a proof)%s: %s\n",
           (unsigned long long)checked, scope,
           gaps(exhaustivePts, sampledPts, skippedPts).c_str());
  js += ",\n  \"notes\": [";
  if (!arpNote.empty())
    js += jsonStr(arpNote);
  js += "],\n  \"warnings\": [";
  for (size_t i = 0; i < warnings.size(); i++)
    js += std::string(i ? ", " : "") + jsonStr(warnings[i]);
  js += "],\n  \"result\": " +
        jsonStr(failed || nonRobust ? "failed"
                : !warnings.empty() ? "incomplete"
                : exhaustive        ? "ok"
                                    : "sampled") +
        "\n}\n";
  if (O.json == "-") { /* one line, last on stdout, for tools */
    js.erase(std::remove(js.begin(), js.end(), '\n'), js.end());
    printf("%s\n", js.c_str());
  } else if (!O.json.empty()) {
    FILE *f = fopen(O.json.c_str(), "w");
    if (!f)
      throw Error("cannot write " + O.json);
    fputs(js.c_str(), f);
    fclose(f);
  }
}

} // namespace

int explore(const Trace &T, const Options &O) {
  Engine E(T, O);
  return E.run();
}

} // namespace pmx
