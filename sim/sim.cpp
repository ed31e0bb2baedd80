// SPDX-License-Identifier: Apache-2.0
//
// sim.cpp -- the machine of pmkit-sim: cores, persist buffers and the PM
// controller, advanced together from one event time to the next.
//   - A core issues its thread's ops in program order, each `work` core
//     cycles after the previous one; an acquire not before the release it
//     reads from. An op the model sends (or that must keep cross-thread
//     order) takes a persist buffer entry; a full buffer stalls the core.
//   - A buffer drains its head to the controller one entry per bus cycle,
//     `drainPs` after it entered, once the write queue has room and, for a
//     tracked acquire, once the release it read from has drained (delegated
//     persist ordering: happens-before order reaches the controller).
//   - The controller numbers epochs with Algorithm 1 as barriers arrive
//     and writes only the oldest epoch still holding writes: an epoch's
//     writes start after every write of the epochs before it has finished.
//     Among those it issues one write per bus cycle, FR-FCFS: the oldest
//     write to an idle bank whose open row it hits, else the oldest to an
//     idle bank. A row miss writes the open row back to the array if it
//     is dirty (tWP), opens the new row (tRCD), then writes (tCWD + burst
//     on the shared data bus); a hit only writes.
// Everything is integer picoseconds and the order of iteration is fixed,
// so a run is deterministic.

#include "sim.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace pms {

Machine machinePreset(const std::string &name) {
  Machine m;
  m.name = name;
  if (name == "pcm")
    return m; // the defaults, documented in sim.h and docs/modes/arp.md
  if (name == "optane") {
    // Optane-like: 256-byte internal lines (XPLine) buffered per bank, a
    // faster media write and a slower read than PCM; see the docs.
    m.rowBytes = 256;
    m.banks = 16;
    m.tRCD = 100000;
    m.tWP = 90000;
    m.tCK = 1250; // a DDR4-1600-like bus
    m.tCWD = 5 * m.tCK;
    m.tBURST = 4 * m.tCK;
    return m;
  }
  std::string known;
  for (const std::string &p : machinePresets())
    known += (known.empty() ? "" : ", ") + p;
  throw std::runtime_error("unknown machine '" + name + "' (choose from " +
                           known + ")");
}

std::vector<std::string> machinePresets() { return {"pcm", "optane"}; }

namespace {

constexpr uint64_t NEVER = std::numeric_limits<uint64_t>::max();

struct Entry {
  uint32_t op;         // index in its thread
  uint32_t pass = 0;   // of a background thread's ops
  uint64_t ready;      // may drain from this time on
  int32_t depTid = -1; // tracked acquire: its release
  uint32_t depIdx = 0;
  Msg msgs[2];
  uint8_t nmsgs = 0;
  bool persists() const {
    for (unsigned i = 0; i < nmsgs; i++)
      if (msgs[i] == Msg::Persist)
        return true;
    return false;
  }
};

struct Core {
  size_t idx = 0;    // next op
  uint32_t pass = 0; // a background thread's ops run again and again
  bool background = false;
  uint64_t t = 0;           // time the previous op issued
  uint64_t blocked = NEVER; // since when the buffer has been full
  uint64_t nextDrain = 0;
  bool done = false;
  uint64_t finish = 0;
  std::deque<Entry> buf;
  // Per op: when and in which pass it last issued, and the last pass in
  // which it drained (-1: not yet).
  std::vector<uint64_t> issued;
  std::vector<uint32_t> issuedPass;
  std::vector<int64_t> drainedPass;
};

struct Req {
  uint64_t line;
  uint64_t epoch;
};

struct Bank {
  int64_t row = -1;
  bool dirty = false;
  uint64_t busy = 0; // until
};

class Sim {
public:
  Sim(const Program &P, const Model &M, const Machine &C,
      std::vector<Write> *log)
      : P(P), M(M), C(C), log(log), cores(P.threads.size()), banks(C.banks) {
    cycPs = (uint64_t)(1000.0 / C.cpuGHz + 0.5);
    for (size_t i = 0; i < cores.size(); i++) {
      size_t n = P.threads[i].ops.size();
      cores[i].issued.assign(n, NEVER);
      cores[i].issuedPass.assign(n, UINT32_MAX);
      cores[i].drainedPass.assign(n, -1);
      cores[i].background = P.threads[i].background;
      foreground += !cores[i].background;
    }
    S.model = M.name();
  }
  Stats run();

private:
  const Program &P;
  const Model &M;
  const Machine &C;
  std::vector<Write> *log;
  std::vector<Core> cores;
  std::vector<Bank> banks;
  std::deque<Req> wq;
  std::vector<std::pair<uint64_t, uint64_t>> inflight; // done, epoch
  std::map<uint64_t, uint64_t> outstanding;            // epoch -> writes
  uint64_t epoch = 0, countedEpoch = NEVER, inEpoch = 0;
  bool waitForAcq = false;
  uint64_t busFree = 0, nextCmd = 0, lastDone = 0;
  uint64_t cycPs = 500;
  uint64_t now = 0, next = NEVER;
  size_t foreground = 0; // foreground threads not finished
  // The locks background threads contend for, by variable.
  struct Lock {
    int64_t holder = -1, last = -1; // cores
    uint64_t at = 0;                // of the last release
  };
  std::unordered_map<uint64_t, Lock> locks;
  Stats S;
  std::vector<Msg> tmp;

  void wake(uint64_t t) {
    if (t > now && t < next)
      next = t;
  }
  bool stepCore(size_t c);
  bool drain(size_t c);
  void arrive(Msg m, const Op &o, uint32_t stores);
  bool retire();
  bool issue();
};

// Issues what core c can at `now`; true if anything changed.
bool Sim::stepCore(size_t c) {
  Core &k = cores[c];
  const Thread &th = P.threads[c];
  bool moved = false;
  while (!k.done) {
    if (k.background && !foreground) {
      k.done = true; // the program is over
      k.finish = k.t;
      return true;
    }
    if (k.idx == th.ops.size()) {
      if (k.background && !th.ops.empty()) { // again, while others run
        k.idx = 0;
        k.pass++;
        continue;
      }
      k.done = true;
      k.finish = k.t + th.tailWork * cycPs;
      foreground -= !k.background;
      return true;
    }
    const Op &o = th.ops[k.idx];
    uint64_t start = k.t + (uint64_t)o.work * cycPs;
    if (k.background && o.kind == Op::Acquire) {
      // Background threads contend for their locks here and now: an
      // acquire waits for the holder's release and for the line to come.
      Lock &l = locks[o.addr];
      if (l.holder >= 0 && (size_t)l.holder != c)
        return moved; // woken when it is released
      if (l.last >= 0 && (size_t)l.last != c)
        start = std::max(start, l.at + C.transferCycles * cycPs);
    } else if (o.kind == Op::Acquire && o.srcTid >= 0 &&
               (size_t)o.srcTid != c) {
      const Core &s = cores[o.srcTid];
      uint32_t p = s.issuedPass[o.srcIdx];
      if (p == UINT32_MAX || p < (s.background ? k.pass : 0))
        return moved; // woken when the release issues
      start = std::max(start, s.issued[o.srcIdx] + C.transferCycles * cycPs);
    }
    if (start > now) {
      wake(start);
      return moved;
    }
    tmp.clear();
    M.lower(o, tmp);
    bool track =
        M.tracked(o) && o.kind != Op::Persist && o.kind != Op::SeqPoint;
    bool needEntry = !tmp.empty() || track;
    if (needEntry && k.buf.size() >= C.persistBuffer) {
      if (k.blocked == NEVER)
        k.blocked = now;
      return moved; // woken when the buffer drains
    }
    if (k.blocked != NEVER) {
      S.coreStallPs += now - k.blocked;
      k.blocked = NEVER;
    }
    k.issued[k.idx] = now;
    k.issuedPass[k.idx] = k.pass;
    // A full barrier is a full fence on the core too (dmb, mfence): the
    // core waits for its earlier stores to leave the store buffer.
    uint64_t fences = 0;
    for (Msg m : tmp)
      fences += m == Msg::Full;
    if (M.perStore()) // each store is sent, and fenced, on its own
      fences *= o.stores;
    k.t = now + fences * C.fenceCycles * cycPs;
    if (k.background && o.kind == Op::Acquire)
      locks[o.addr].holder = (int64_t)c;
    if (k.background && o.kind == Op::Release) {
      Lock &l = locks[o.addr];
      l.holder = -1;
      l.last = (int64_t)c;
      l.at = now;
    }
    if (needEntry) {
      Entry e;
      e.op = (uint32_t)k.idx;
      e.pass = k.pass;
      e.ready = now + C.drainPs;
      // A background thread's lock order is the one it took here (above),
      // not the recorded one, and it persists nothing to order.
      if (track && !k.background && o.kind == Op::Acquire && o.srcTid >= 0 &&
          (size_t)o.srcTid != c) {
        e.depTid = o.srcTid;
        e.depIdx = o.srcIdx;
      }
      for (Msg m : tmp)
        e.msgs[e.nmsgs++] = m;
      k.buf.push_back(e);
      wake(e.ready);
    } else {
      k.drainedPass[k.idx] = k.pass;
    }
    k.idx++;
    moved = true;
  }
  return moved;
}

// Moves core c's buffer head to the controller if it may go now.
bool Sim::drain(size_t c) {
  Core &k = cores[c];
  if (k.buf.empty())
    return false;
  Entry &e = k.buf.front();
  uint64_t at = std::max(e.ready, k.nextDrain);
  if (at > now) {
    wake(at);
    return false;
  }
  if (e.depTid >= 0) {
    const Core &s = cores[e.depTid];
    if (s.drainedPass[e.depIdx] < (s.background ? (int64_t)e.pass : 0))
      return false; // woken when that release drains
  }
  const Op &o = P.threads[c].ops[e.op];
  uint32_t reps = M.perStore() ? o.stores : 1;
  // An op of more stores than the queue holds goes when it is empty.
  if (e.persists() && !wq.empty() &&
      wq.size() + std::min<uint64_t>(reps, C.writeQueue) > C.writeQueue)
    return false; // woken when a write issues
  for (uint32_t r = 0; r < reps; r++)
    for (unsigned i = 0; i < e.nmsgs; i++)
      arrive(e.msgs[i], o, reps > 1 ? 1 : o.stores);
  k.drainedPass[e.op] = e.pass;
  k.buf.pop_front();
  k.nextDrain = now + C.tCK;
  wake(k.nextDrain);
  return true;
}

// Algorithm 1, at the controller.
void Sim::arrive(Msg m, const Op &o, uint32_t stores) {
  switch (m) {
  case Msg::Persist: {
    unsigned fixed = M.fixedEpoch();
    if (fixed && inEpoch >= fixed) {
      epoch++;
      inEpoch = 0;
    }
    inEpoch += stores;
    if (countedEpoch != epoch) {
      S.epochs++;
      countedEpoch = epoch;
    }
    S.persists += stores;
    // A write to a line already queued in the same epoch joins it (write
    // combining): persists of one epoch may persist together.
    for (const Req &r : wq)
      if (r.line == o.addr && r.epoch == epoch)
        return;
    wq.push_back(Req{o.addr, epoch});
    outstanding[epoch]++;
    break;
  }
  case Msg::Full:
    S.syncMsgs++;
    epoch++;
    break;
  case Msg::Acq:
    S.syncMsgs++;
    if (waitForAcq) {
      epoch++;
      waitForAcq = false;
    }
    break;
  case Msg::Rel:
    S.syncMsgs++;
    waitForAcq = true;
    break;
  }
}

// Finishes the writes done by `now`.
bool Sim::retire() {
  bool moved = false;
  for (size_t i = 0; i < inflight.size();) {
    if (inflight[i].first <= now) {
      auto it = outstanding.find(inflight[i].second);
      if (--it->second == 0)
        outstanding.erase(it);
      inflight[i] = inflight.back();
      inflight.pop_back();
      moved = true;
    } else {
      wake(inflight[i].first);
      i++;
    }
  }
  return moved;
}

// Issues one write of the oldest epoch, FR-FCFS.
bool Sim::issue() {
  if (wq.empty())
    return false;
  if (nextCmd > now) {
    wake(nextCmd);
    return false;
  }
  uint64_t oldest = outstanding.begin()->first;
  const uint64_t linesPerRow = C.rowBytes / 64;
  auto bankOf = [&](uint64_t line) {
    return (size_t)(((line >> 6) / linesPerRow) % C.banks);
  };
  auto rowOf = [&](uint64_t line) {
    return (int64_t)((line >> 6) / linesPerRow / C.banks);
  };
  size_t pick = NEVER, first = NEVER;
  for (size_t i = 0; i < wq.size(); i++) {
    const Req &r = wq[i];
    if (r.epoch != oldest)
      continue;
    Bank &b = banks[bankOf(r.line)];
    if (b.busy > now) {
      wake(b.busy);
      continue;
    }
    if (first == NEVER)
      first = i;
    if (b.row == rowOf(r.line)) {
      pick = i;
      break;
    }
  }
  if (pick == NEVER)
    pick = first;
  if (pick == NEVER)
    return false;
  Req r = wq[pick];
  wq.erase(wq.begin() + (std::ptrdiff_t)pick);
  S.writes++;
  Bank &b = banks[bankOf(r.line)];
  uint64_t pre = C.tCWD;
  bool hit = b.row == rowOf(r.line);
  if (hit) {
    S.rowHits++;
  } else {
    S.rowMisses++;
    pre += (b.dirty ? C.tWP : 0) + C.tRCD;
    b.row = rowOf(r.line);
  }
  uint64_t done = std::max(now + pre, busFree) + C.tBURST;
  busFree = done;
  b.busy = done;
  b.dirty = true;
  inflight.push_back({done, r.epoch});
  if (log)
    log->push_back(Write{r.line, r.epoch, now, done, hit});
  lastDone = std::max(lastDone, done);
  nextCmd = now + C.tCK;
  wake(done);
  wake(nextCmd);
  return true;
}

Stats Sim::run() {
  for (;;) {
    next = NEVER;
    bool moved = false;
    for (size_t c = 0; c < cores.size(); c++)
      moved |= stepCore(c);
    for (size_t c = 0; c < cores.size(); c++)
      moved |= drain(c);
    moved |= retire();
    moved |= issue();
    if (moved)
      continue; // something changed at `now`: look again
    bool finished = wq.empty() && inflight.empty();
    for (const Core &k : cores)
      finished = finished && k.done && k.buf.empty();
    if (finished)
      break;
    if (next == NEVER)
      throw std::logic_error("pmkit sim: the machine stalled (a bug)");
    now = next;
  }
  uint64_t end = lastDone, cycles = 0;
  for (size_t c = 0; c < cores.size(); c++) {
    if (!cores[c].background)
      end = std::max(end, cores[c].finish);
    bool persists = false;
    for (const Op &o : P.threads[c].ops)
      persists = persists || o.kind == Op::Persist;
    if (persists)
      cycles += cores[c].finish / cycPs;
  }
  S.timePs = end;
  S.pkc = cycles ? 1000.0 * (double)P.persists() / (double)cycles : 0;
  return S;
}

} // namespace

std::string machineProblem(const Machine &C) {
  if (C.rowBytes < 64 || C.rowBytes % 64)
    return "row-bytes must be a multiple of 64";
  if (!C.banks || !C.writeQueue || !C.persistBuffer)
    return "banks, write-queue and persist-buffer must be at least 1";
  return "";
}

Stats simulate(const Program &P, const Model &M, const Machine &C,
               std::vector<Write> *log) {
  std::string bad = machineProblem(C);
  if (!bad.empty())
    throw std::runtime_error("pmkit sim: bad machine parameters: " + bad);
  return Sim(P, M, C, log).run();
}

} // namespace pms
