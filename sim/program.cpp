// SPDX-License-Identifier: Apache-2.0
//
// program.cpp -- turns a trace (read with the explorer's trace reader) or
// calls of a test into a pmkit-sim Program: per thread, in program order,
// the cache lines it persists and its acquires, releases and sequence
// points, each acquire linked to the release it read from. The trace's
// seq order decides that link: a release takes its seq before its store
// and an acquire after its load (trace_format.h), so the last release on
// the variable before the acquire is the one it read, unless releases on
// one variable race.

#include "sim.h"
#include "trace.h"

#include <algorithm>
#include <unordered_map>

namespace pms {

uint64_t Program::persists() const {
  uint64_t n = 0;
  for (const Thread &t : threads)
    for (const Op &o : t.ops)
      n += o.kind == Op::Persist ? o.stores : 0;
  return n;
}

namespace {

// Appends ops to threads and links acquires (shared by both builders).
// The acquire half of a read-modify-write (recorded after its release
// half) reads the release before it, not its own.
struct Linker {
  using Ref = std::pair<int32_t, uint32_t>; // thread, op
  Program &P;
  std::unordered_map<uint64_t, Ref> &last;
  std::unordered_map<unsigned, std::pair<uint64_t, Ref>> rmwPrior;
  // A compare-exchange failed: its release (just recorded) did not happen.
  void failed(unsigned t, uint64_t addr) {
    auto prior = rmwPrior.find(t);
    if (prior == rmwPrior.end() || prior->second.first != addr)
      return;
    if (prior->second.second.first < 0)
      last.erase(addr);
    else
      last[addr] = prior->second.second;
  }
  void push(unsigned t, Op o, bool rmw = false) {
    Thread &th = P.threads[t];
    if (o.kind == Op::Acquire) {
      auto prior = rmwPrior.find(t);
      Ref src{-1, 0};
      if (rmw && prior != rmwPrior.end() && prior->second.first == o.addr) {
        src = prior->second.second;
      } else {
        auto it = last.find(o.addr);
        if (it != last.end())
          src = it->second;
      }
      o.srcTid = src.first;
      o.srcIdx = src.second;
      rmwPrior.erase(t);
    } else if (o.kind == Op::Release) {
      if (rmw) {
        auto it = last.find(o.addr);
        rmwPrior[t] = {o.addr, it == last.end() ? Ref{-1, 0} : it->second};
      }
      last[o.addr] = {(int32_t)t, (uint32_t)th.ops.size()};
    }
    th.ops.push_back(o);
  }
};

} // namespace

Program fromTrace(const std::string &path, const BuildOptions &O) {
  pmx::Trace T(path);
  return fromTrace(T, path, O);
}

Program fromTrace(const pmx::Trace &T, const std::string &path,
                  const BuildOptions &O) {
  if (!T.complete)
    throw pmx::Error(path + " is incomplete (no END block): the traced "
                            "program did not exit normally");
  Program P;
  std::unordered_map<uint64_t, Linker::Ref> last;
  Linker L{P, last, {}};
  std::unordered_map<uint32_t, unsigned> index; // trace tid -> thread
  std::vector<uint64_t> work;                   // pending cycles per thread
  auto threadOf = [&](uint32_t tid) {
    auto [it, fresh] = index.try_emplace(tid, (unsigned)P.threads.size());
    if (fresh) {
      P.threads.push_back(Thread{});
      P.threads.back().tid = tid;
      work.push_back(0);
    }
    return it->second;
  };
  auto take = [&](unsigned t) {
    uint64_t w = work[t];
    work[t] = 0;
    return (uint32_t)std::min<uint64_t>(w, UINT32_MAX);
  };
  uint64_t from = 0, to = UINT64_MAX;
  if (!O.mark.empty()) {
    uint32_t id = 0;
    for (auto &[k, name] : T.marks)
      if (name == O.mark)
        id = k;
    from = to = 0;
    for (const pmx::Event &e : T.events)
      if (id && e.arg == id && e.kind == PMKIT_EV_MARK_BEGIN && !from)
        from = e.seq;
      else if (id && e.arg == id && e.kind == PMKIT_EV_MARK_END && from)
        to = std::max(to, e.seq);
    if (!from || !to)
      throw pmx::Error(path + " has no operation marked '" + O.mark +
                       "' with a begin and an end");
  }
  uint32_t bgId = 0;
  for (auto &[k, name] : T.marks)
    if (!O.background.empty() && name == O.background)
      bgId = k;
  for (const pmx::Event &e : T.events) {
    if (e.seq < from || e.seq > to)
      continue;
    if (bgId && e.kind == PMKIT_EV_MARK_BEGIN && e.arg == bgId)
      P.threads[threadOf(e.tid)].background = true;
    bool sync = e.kind == PMKIT_EV_ACQUIRE || e.kind == PMKIT_EV_RELEASE ||
                e.kind == PMKIT_EV_SEQPOINT;
    if (!sync && !e.writes() && e.kind != PMKIT_EV_LOAD)
      continue; // flushes, fences, marks: the simulated hardware's business
    unsigned t = threadOf(e.tid);
    work[t] += O.eventCycles;
    if (e.kind == PMKIT_EV_LOAD)
      continue;
    Op o;
    o.vol = (e.aux & PMKIT_SYNC_VOLATILE) && sync;
    if (e.writes()) {
      uint64_t len = e.length() ? e.length() : 1;
      for (uint64_t line = e.addr & ~63ull; line < e.addr + len; line += 64) {
        uint64_t lo = std::max(line, e.addr),
                 hi = std::min(line + 64, e.addr + len);
        uint32_t n = O.lines ? 1 : (uint32_t)((hi - lo + 7) / 8);
        std::vector<Op> &ops = P.threads[t].ops;
        if (O.coalesce && !ops.empty() && ops.back().kind == Op::Persist &&
            ops.back().addr == line) {
          ops.back().stores += O.lines ? 0 : n;
          continue;
        }
        o.kind = Op::Persist;
        o.addr = line;
        o.stores = n;
        o.work = take(t);
        L.push(t, o);
      }
      continue;
    }
    if (e.kind == PMKIT_EV_ACQUIRE && (e.aux & PMKIT_SYNC_FAILED)) {
      L.failed(t, e.addr);
      continue; // an event of the trace, not an op of the program
    }
    o.kind = e.kind == PMKIT_EV_ACQUIRE   ? Op::Acquire
             : e.kind == PMKIT_EV_RELEASE ? Op::Release
                                          : Op::SeqPoint;
    o.addr = e.addr;
    o.work = take(t);
    L.push(t, o, e.aux & PMKIT_SYNC_RMW);
  }
  for (unsigned t = 0; t < P.threads.size(); t++)
    P.threads[t].tailWork = work[t];
  return P;
}

ProgramBuilder::ProgramBuilder(unsigned threads) {
  P.threads.resize(threads);
  for (unsigned t = 0; t < threads; t++)
    P.threads[t].tid = t;
}

ProgramBuilder &ProgramBuilder::push(unsigned t, Op::Kind k, uint64_t addr,
                                     bool vol, uint32_t work, uint32_t stores) {
  Op o;
  o.stores = stores;
  o.kind = k;
  o.addr = addr;
  o.vol = vol;
  o.work = work;
  Linker L{P, lastRelease, {}};
  L.push(t, o);
  return *this;
}

ProgramBuilder &ProgramBuilder::persist(unsigned t, uint64_t line,
                                        uint32_t work, uint32_t stores) {
  return push(t, Op::Persist, line & ~63ull, false, work, stores);
}

ProgramBuilder &ProgramBuilder::acquire(unsigned t, uint64_t var, bool vol,
                                        uint32_t work) {
  return push(t, Op::Acquire, var, vol, work);
}

ProgramBuilder &ProgramBuilder::release(unsigned t, uint64_t var, bool vol,
                                        uint32_t work) {
  return push(t, Op::Release, var, vol, work);
}

ProgramBuilder &ProgramBuilder::seqPoint(unsigned t, bool vol, uint32_t work) {
  return push(t, Op::SeqPoint, 0, vol, work);
}

} // namespace pms
