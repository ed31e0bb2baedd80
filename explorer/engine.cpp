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
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sys/stat.h>
#include <thread>
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
};

// One deviation, as the engine knows it: unit ui keeps k of its n writes.
struct Choice {
  uint32_t ui, k, n;
};

struct JobInfo {
  size_t point = 0; // index into the crash points
  size_t pos = 0;
  std::vector<Choice> choices;
};

struct Failure {
  JobInfo info;
  Result result;
};

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%#llx", (unsigned long long)v);
  return b;
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
  uint64_t perPoint = 0; // images per crash point, from the budget
  std::vector<Failure> failures;

  // --robustness: images no strict-persistency execution produces, by the
  // pair of writes (lost, later kept) that shows it.
  struct Violation {
    uint32_t lostEv, keptEv;
    uint64_t images = 0;
    size_t pos = 0;
  };
  std::map<std::pair<uint32_t, uint32_t>, Violation> violations;
  uint64_t nonRobust = 0, robustChecked = 0, wholeImage = 0;
  void robustness(const JobInfo &info, const Result &r);
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
  std::vector<size_t> crashPoints();
  void generate(size_t point, size_t pos);
  uint64_t imageHash(const std::vector<Choice> &cs);
  Job makeJob(size_t pos, const std::vector<Choice> &cs);
  void submit(const JobInfo &info);
  void collect(bool all);
  void workerLoop(unsigned slot);
  Result checkNow(const JobInfo &info);
  void minimise(Failure &f);
  void progress(bool final);
  void report(double secs);
  std::string describePoint(size_t pos) const;
  std::string operationAt(size_t pos) const;
  std::vector<size_t> pointsList;
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
        units.push_back(Unit{a, {}, {}, 0, -1});
      uint32_t ui = it->second;
      Unit &u = units[ui];
      uint64_t lo = std::max(a, e.addr), hi = std::min(a + U, e.addr + len);
      u.before.insert(u.before.end(), c, c + U);
      H -= uh(a, c);
      for (uint64_t b = lo; b < hi; b++)
        c[b - a] = e.byte(b - e.addr);
      H += uh(a, c);
      u.hist.push_back(
          Piece{(uint32_t)i, (uint16_t)(lo - a), (uint16_t)(hi - lo)});
      if (PO)
        evUnits[(uint32_t)i].push_back({ui, (uint32_t)u.hist.size() - 1});
      // A non-temporal store bypasses the cache (eADR does not cover its
      // write-combining buffer): it persists at its thread's next fence in
      // every model. Other writes persist at once without volatile caches.
      if (e.kind == PMKIT_EV_NTSTORE)
        pending[e.tid].push_back({ui, (uint32_t)u.hist.size()});
      else if (!M->volatileCaches())
        u.lb = (uint32_t)u.hist.size();
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
          pmkit_trace_checksum(s.cur.data(), s.pool->size) != e.arg)
        warnings.push_back(
            "the content of pool " + s.pool->path + " at close (event " +
            std::to_string(i) +
            ") differs from the traced writes: some writes were not seen "
            "(uninstrumented code or a system call wrote to the pool); "
            "crash images may be wrong");
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

std::vector<size_t> Engine::crashPoints() {
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
  std::vector<size_t> out;
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
      if (take)
        out.push_back(i);
    }
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
    out.push_back(T.events.size());
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

void Engine::submit(const JobInfo &info) {
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
      robustness(info, r);
    if (r.cannotRun)
      throw Error("the checker could not run (" + r.status + ")" +
                  (r.output.empty() ? "" : ": " + r.output));
    if (!r.ok) {
      failed++;
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

void Engine::generate(size_t point, size_t pos) {
  std::vector<uint32_t> u(und);
  std::sort(u.begin(), u.end(), [&](uint32_t a, uint32_t b) {
    return units[a].addr < units[b].addr;
  });
  std::mt19937_64 rng(mix(O.seed ^ mix(pos)));
  std::vector<std::vector<Choice>> imgs;
  auto lbChoice = [&](uint32_t ui) {
    return Choice{ui, units[ui].lb, (uint32_t)units[ui].hist.size()};
  };
  // Exhaustive if the product of the choices is small.
  double product = 1;
  for (uint32_t ui : u)
    product *= units[ui].hist.size() - units[ui].lb + 1;
  std::vector<std::vector<Choice>> cand;
  if (product <= (double)perPoint) {
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
    // Structured first: nothing optional persisted, everything persisted,
    // each unit alone lost, each unit alone persisted; then random.
    std::vector<Choice> none;
    for (uint32_t ui : u)
      none.push_back(lbChoice(ui));
    cand.push_back(none);
    cand.push_back({});
    // The arp model keeps half of the images for losses of recent writes:
    // single units, taken in address order, would spend a small budget on
    // the lowest addresses alone.
    size_t structured = PO ? 2 + (perPoint - 2) / 2 : perPoint;
    for (size_t i = 0; i < u.size() && cand.size() < structured; i++)
      cand.push_back({lbChoice(u[i])});
    for (size_t i = 0; i < u.size() && cand.size() < structured; i++) {
      std::vector<Choice> cs;
      for (size_t j = 0; j < u.size(); j++)
        if (j != i)
          cs.push_back(lbChoice(u[j]));
      cand.push_back(std::move(cs));
    }
    while (cand.size() < perPoint) {
      if (PO) { // mostly what ordering lets go first: recent writes
        cand.push_back(recentLoss(rng));
        if (cand.size() % 4)
          continue;
      }
      std::vector<Choice> cs;
      for (uint32_t ui : u) {
        uint32_t n = (uint32_t)units[ui].hist.size();
        uint32_t k = units[ui].lb + (uint32_t)(rng() % (n - units[ui].lb + 1));
        if (k < n)
          cs.push_back({ui, k, n});
      }
      cand.push_back(std::move(cs));
    }
  }
  for (auto &cs : cand) {
    generated++;
    if (PO)
      close(cs);
    uint64_t h = imageHash(cs);
    if (!seen.insert(h).second)
      continue;
    distinct++;
    if (distinct > O.budget)
      return;
    JobInfo info{point, pos, std::move(cs)};
    submit(info);
  }
}

// Is the image one some prefix of the recorded order produces, on the units
// the checker read (all written units if it recorded no reads)? A prefix
// ending at p keeps exactly the writes before p, so the image needs p after
// every kept write and at or before every lost one; it fails when a kept
// write comes after a lost one.
void Engine::robustness(const JobInfo &info, const Result &r) {
  robustChecked++;
  std::unordered_map<uint32_t, uint32_t> dev;
  for (const Choice &c : info.choices)
    dev[c.ui] = c.k;
  const uint32_t none = UINT32_MAX;
  uint32_t lostEv = none, keptEv = none;
  auto consider = [&](uint32_t ui) {
    const Unit &u = units[ui];
    uint32_t n =
        (uint32_t)(std::lower_bound(
                       u.hist.begin(), u.hist.end(), info.pos,
                       [](const Piece &p, size_t pos) { return p.ev < pos; }) -
                   u.hist.begin());
    if (!n)
      return;
    auto it = dev.find(ui);
    uint32_t k = it == dev.end() ? n : it->second;
    if (k > 0 && (keptEv == none || u.hist[k - 1].ev > keptEv))
      keptEv = u.hist[k - 1].ev;
    if (k < n && (lostEv == none || u.hist[k].ev < lostEv))
      lostEv = u.hist[k].ev;
  };
  if (r.readsKnown) {
    std::set<uint64_t> seenUnits;
    for (uint64_t a : r.reads) {
      uint64_t ua = a & ~(uint64_t)(U - 1);
      if (!seenUnits.insert(ua).second)
        continue;
      auto it = index.find(ua);
      if (it != index.end())
        consider(it->second);
    }
  } else {
    wholeImage++;
    for (const Choice &c : info.choices)
      consider(c.ui);
    // The latest write before the crash to a unit the image keeps whole.
    for (size_t i = info.pos; i-- > 0 && keptEv == none;) {
      const Event &e = T.events[i];
      if (!e.writes())
        continue;
      uint64_t len = e.length();
      for (uint64_t a = e.addr & ~(uint64_t)(U - 1); a < e.addr + len; a += U) {
        auto it = index.find(a);
        if (it != index.end() && !dev.count(it->second)) {
          consider(it->second);
          break;
        }
      }
      if (keptEv != none && lostEv != none && keptEv < lostEv)
        return; // the latest kept write precedes every lost one: robust
    }
  }
  if (lostEv == none || keptEv == none || keptEv < lostEv)
    return;
  nonRobust++;
  const Event &a = T.events[lostEv], &b = T.events[keptEv];
  auto key = std::make_pair(a.loc ? a.loc : lostEv, b.loc ? b.loc : keptEv);
  auto [it, fresh] = violations.try_emplace(key, Violation{lostEv, keptEv});
  if (fresh)
    it->second.pos = info.pos;
  it->second.images++;
}

std::string Engine::violationText(const Violation &v) const {
  const Event &a = T.events[v.lostEv], &b = T.events[v.keptEv];
  std::string A = T.locText(a.loc) + " (thread " + std::to_string(a.tid) + ")";
  std::string B = T.locText(b.loc) + " (thread " + std::to_string(b.tid) + ")";
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

std::string Engine::describePoint(size_t pos) const {
  if (pos >= T.events.size())
    return "at the end of the run";
  const Event &e = T.events[pos];
  return "before event " + std::to_string(pos) + " of " +
         std::to_string(T.events.size()) + ": " + kindName(e.kind) + " at " +
         T.locText(e.loc) + " (thread " + std::to_string(e.tid) + ")";
}

void Engine::minimise(Failure &f) {
  std::vector<Choice> cs = f.info.choices;
  unsigned budget = 64;
  for (size_t i = 0; i < cs.size() && budget;) {
    std::vector<Choice> trial(cs);
    trial.erase(trial.begin() + (long)i);
    std::vector<Choice> closed(trial);
    if (PO && close(closed)) { // keeping that unit breaks the persist order
      i++;
      continue;
    }
    JobInfo info{f.info.point, f.info.pos, trial};
    budget--;
    Result r = checkNow(info);
    if (!r.ok && !r.cannotRun) {
      cs = std::move(trial);
      f.result = std::move(r);
    } else {
      i++;
    }
  }
  f.info.choices = std::move(cs);
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
  for (; done < pointsList.size() && pointsList[done] < at; done++)
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
  if (pointsList.size() > std::max<uint64_t>(1, O.budget / 2)) {
    std::mt19937_64 rng(mix(O.seed));
    std::vector<size_t> pick(pointsList);
    std::shuffle(pick.begin(), pick.end(), rng);
    pick.resize(std::max<uint64_t>(1, O.budget / 2));
    std::sort(pick.begin(), pick.end());
    pointsList = pick;
  }
  npoints = pointsList.size();
  // Share the budget out so that late crash points get images too.
  perPoint = std::clamp<uint64_t>(O.budget / std::max<size_t>(1, npoints), 2,
                                  O.perPoint);

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
      advance(pointsList[p]);
      if (distinct < O.budget)
        generate(p, pointsList[p]);
      collect(false);
      progress(false);
    }
    collect(true);
  } catch (...) {
    stop();
    throw;
  }
  stop();
  progress(true);
  advance(T.events.size());

  // Minimise the first failures and show those that differ in what was
  // lost (by source location).
  std::set<std::vector<uint32_t>> shownSigs;
  std::vector<Failure> shown;
  size_t tried = 0;
  for (Failure &f : failures) {
    if (shown.size() >= O.maxReports || tried >= 4 * (size_t)O.maxReports)
      break;
    tried++;
    minimise(f);
    std::vector<uint32_t> sig;
    for (const Choice &c : f.info.choices)
      for (uint32_t k = c.k; k < c.n; k++)
        sig.push_back(T.events[units[c.ui].hist[k].ev].loc);
    std::sort(sig.begin(), sig.end());
    if (shownSigs.insert(sig).second)
      shown.push_back(f);
  }
  failures = std::move(shown);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  report(secs);
  return failed || nonRobust ? 1 : 0;
}

void Engine::report(double secs) {
  std::string dir = O.saveDir.empty() ? "pmkit-explore-failures" : O.saveDir;
  struct stat sb;
  if (!failures.empty() && mkdir(dir.c_str(), 0755) != 0 &&
      !(errno == EEXIST && stat(dir.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode)))
    throw Error("cannot create the directory " + dir +
                " for failing images (--save-dir)");
  std::vector<std::string> images, repro;
  for (size_t i = 0; i < failures.size(); i++) {
    std::string path = dir + "/fail-" + std::to_string(i + 1) + ".pool";
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
  printf("\n  crash points: %zu", npoints);
  if (npoints != allPoints)
    printf(" (sampled from %zu with seed %llu)", allPoints,
           (unsigned long long)O.seed);
  printf("\n  images:       %llu generated, %llu distinct, %llu checked, "
         "%llu failed%s\n",
         (unsigned long long)generated, (unsigned long long)distinct,
         (unsigned long long)checked, (unsigned long long)failed,
         distinct > O.budget ? " (budget reached)" : "");
  printf("  time:         %.2f s (%.0f images/s, %u job%s)\n", secs,
         secs > 0 ? checked / secs : 0.0, (unsigned)slots.size(),
         slots.size() == 1 ? "" : "s");
  for (const std::string &w : warnings)
    printf("  warning: %s\n", w.c_str());

  std::string js = "{\n  \"model\": " + jsonStr(M->name()) +
                   ",\n  \"points\": " + jsonStr(pts) +
                   ",\n  \"events\": " + std::to_string(T.events.size()) +
                   ",\n  \"threads\": " + std::to_string(T.threads) +
                   ",\n  \"crash_points\": " + std::to_string(npoints) +
                   ",\n  \"crash_points_total\": " + std::to_string(allPoints) +
                   ",\n  \"images_generated\": " + std::to_string(generated) +
                   ",\n  \"images_distinct\": " + std::to_string(distinct) +
                   ",\n  \"images_checked\": " + std::to_string(checked) +
                   ",\n  \"images_failed\": " + std::to_string(failed) +
                   ",\n  \"seconds\": " + std::to_string(secs) +
                   ",\n  \"images_per_second\": " +
                   std::to_string(secs > 0 ? checked / secs : 0.0) +
                   ",\n  \"jobs\": " + std::to_string(slots.size()) +
                   ",\n  \"seed\": " + std::to_string(O.seed) +
                   ",\n  \"failures\": [";
  for (size_t i = 0; i < failures.size(); i++) {
    const Failure &f = failures[i];
    std::string op = operationAt(f.info.pos);
    printf("\nFAIL %zu: crash %s%s\n", i + 1, describePoint(f.info.pos).c_str(),
           op.empty() ? "" : (", during " + op).c_str());
    printf("  lost writes (a minimal set; every other write before the crash "
           "persisted):\n");
    js += std::string(i ? "," : "") +
          "\n    {\"position\": " + std::to_string(f.info.pos) +
          ", \"crash_point\": " + jsonStr(describePoint(f.info.pos)) +
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
               T.locText(e.loc).c_str(), e.tid, kindName(e.kind),
               (unsigned long long)e.length(), where.c_str(), val.c_str());
        js += std::string(firstLost ? "" : ", ") +
              "{\"event\": " + std::to_string(pc.ev) +
              ", \"loc\": " + jsonStr(T.locText(e.loc)) +
              ", \"thread\": " + std::to_string(e.tid) +
              ", \"kind\": " + jsonStr(kindName(e.kind)) +
              ", \"addr\": " + jsonStr(where) +
              ", \"length\": " + std::to_string(e.length()) + "}";
        firstLost = false;
      }
    }
    if (f.info.choices.empty())
      printf("    none: the fully persisted image at this point fails\n");
    printf("  checker: %s%s\n", f.result.status.c_str(),
           f.result.output.empty() ? "" : (": " + f.result.output).c_str());
    printf("  image: %s\n  reproduce: %s\n", images[i].c_str(),
           repro[i].c_str());
    js += "], \"checker\": " + jsonStr(f.result.status) +
          ", \"output\": " + jsonStr(f.result.output) +
          ", \"image\": " + jsonStr(images[i]) +
          ", \"reproduce\": " + jsonStr(repro[i]) + "}";
  }
  if (failed > failures.size())
    printf("\n(%llu more failing images not shown)\n",
           (unsigned long long)(failed - failures.size()));
  js += "\n  ],\n  \"robustness\": ";
  if (!O.robustness) {
    js += "null";
  } else {
    printf("\nrobustness: %llu of %llu images no strict-persistency execution "
           "produces (judged on %s)\n",
           (unsigned long long)nonRobust, (unsigned long long)robustChecked,
           wholeImage ? "the whole image: the checker recorded no reads"
                      : "the locations the checker read");
    std::vector<const Violation *> vs;
    for (auto &[k, v] : violations)
      vs.push_back(&v);
    std::sort(vs.begin(), vs.end(), [](const Violation *x, const Violation *y) {
      return x->images > y->images;
    });
    js += "{\"images\": " + std::to_string(robustChecked) +
          ", \"violating\": " + std::to_string(nonRobust) +
          ", \"whole_image\": " + (wholeImage ? "true" : "false") +
          ", \"violations\": [";
    for (size_t i = 0; i < vs.size(); i++) {
      std::string text = violationText(*vs[i]);
      if (i < 20)
        printf("  %s [%llu image%s; first crash %s]\n", text.c_str(),
               (unsigned long long)vs[i]->images, vs[i]->images == 1 ? "" : "s",
               describePoint(vs[i]->pos).c_str());
      js += std::string(i ? ", " : "") + "{\"text\": " + jsonStr(text) +
            ", \"lost\": " + jsonStr(T.locText(T.events[vs[i]->lostEv].loc)) +
            ", \"kept\": " + jsonStr(T.locText(T.events[vs[i]->keptEv].loc)) +
            ", \"images\": " + std::to_string(vs[i]->images) + "}";
    }
    if (vs.size() > 20)
      printf("  (%zu more pairs in the JSON report)\n", vs.size() - 20);
    js += "]}";
  }
  if (failed)
    printf("\nresult: FAILED: %llu of %llu crash images are inconsistent\n",
           (unsigned long long)failed, (unsigned long long)checked);
  else if (nonRobust)
    printf("\nresult: FAILED: all %llu crash images are consistent, but %llu "
           "are not robust\n",
           (unsigned long long)checked, (unsigned long long)nonRobust);
  else
    printf("\nresult: ok: all %llu crash images are consistent\n",
           (unsigned long long)checked);
  js += ",\n  \"warnings\": [";
  for (size_t i = 0; i < warnings.size(); i++)
    js += std::string(i ? ", " : "") + jsonStr(warnings[i]);
  js += "],\n  \"result\": " + jsonStr(failed || nonRobust ? "failed" : "ok") +
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
