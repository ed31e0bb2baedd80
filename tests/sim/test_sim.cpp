// SPDX-License-Identifier: Apache-2.0
//
// test_sim.cpp -- unit tests of pmkit-sim's models and machine on
// hand-built programs: the paper's Figure 3 (epochs for conflicting and
// for interleaved acquire-release blocks), Figure 2 (fence direction and
// volatile syncs), Algorithm 1's corner cases, epoch order at the
// controller, FR-FCFS row hits, the persist buffer's back-pressure and
// determinism. Each ordering check is also run where the order must NOT
// hold (Ideal), so that the check itself is shown able to fail.
// Run: ctest -R sim (or build/tests/sim/test_sim).

#include "sim.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace pms;

static int failures;

#define CHECK(c)                                                               \
  do {                                                                         \
    if (!(c)) {                                                                \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #c);          \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static Stats run(const Program &P, const char *model,
                 std::vector<Write> *log = nullptr,
                 const Machine &m = machinePreset("pcm")) {
  return simulate(P, *makeModel(model), m, log);
}

static const Write *find(const std::vector<Write> &log, uint64_t line) {
  for (const Write &w : log)
    if (w.line == line)
      return &w;
  return nullptr;
}

// Lines in distinct banks and rows, so that timing never hides an order.
static uint64_t L(unsigned i) { return (uint64_t)i * 1024; }

// Figure 3 (a): core 0 holds lock A while it persists X, releases, then
// persists Y; core 1 then takes A, persists X and, after its release, Z.
// Persists between a release and the next acquire join the prior epoch:
// {X0, Y0} then {X1, Z1}, and X is written in program order.
static void figure3a() {
  const uint64_t A = 0x10, X = L(0), Y = L(1), Z = L(2);
  ProgramBuilder b(2);
  b.release(0, 0x99); // an earlier release: the first acquire opens epoch 1
  b.acquire(0, A).persist(0, X).release(0, A).persist(0, Y);
  // Core 1 starts late enough that Y0 reaches the controller first, as in
  // the figure.
  b.acquire(1, A, false, 400).persist(1, X + 64).release(1, A).persist(1, Z);
  std::vector<Write> log;
  Stats s = run(b.program(), "arp", &log);
  CHECK(s.persists == 4);
  CHECK(s.epochs == 2);
  const Write *x0 = find(log, X), *y0 = find(log, Y), *x1 = find(log, X + 64),
              *z1 = find(log, Z);
  CHECK(x0 && y0 && x1 && z1);
  if (!(x0 && y0 && x1 && z1))
    return;
  CHECK(x0->epoch == y0->epoch);
  CHECK(x1->epoch == z1->epoch);
  CHECK(x1->epoch == x0->epoch + 1);
  CHECK(x1->start >= x0->done && x1->start >= y0->done);
  // RCBSP: every sync is a full barrier, one persist per epoch here.
  CHECK(run(b.program(), "rcbsp").epochs == 4);
  CHECK(run(b.program(), "scp").epochs == 4);
}

// Figure 3 (b): two cores in critical sections of different locks. No
// release came before either acquire, so neither opens an epoch, and the
// releases arm an acquire that never comes: all persists share one epoch.
static void figure3b() {
  const uint64_t A0 = 0x10, A1 = 0x20;
  ProgramBuilder b(2);
  b.acquire(0, A0).acquire(1, A1);
  b.persist(0, L(0)).persist(1, L(1));
  b.release(1, A1);
  b.release(0, A0, false, 40).persist(0, L(2));
  Stats s = run(b.program(), "arp");
  CHECK(s.persists == 3);
  CHECK(s.epochs == 1);
  // RCBSP: the releases are full barriers, so Y0 is ordered after both
  // critical sections: {X0, W1} then {Y0}.
  CHECK(run(b.program(), "rcbsp").epochs == 2);
}

// Figure 2 (a): A, acquire, B, release, C on one thread are concurrent
// under ARP (one epoch) but serialised by full fences under RCBSP.
static void figure2a() {
  ProgramBuilder b(1);
  b.persist(0, L(0)).acquire(0, 0x10).persist(0, L(1));
  b.release(0, 0x10).persist(0, L(2));
  CHECK(run(b.program(), "arp").epochs == 1);
  CHECK(run(b.program(), "rcbsp").epochs == 3);
  CHECK(run(b.program(), "scp").epochs == 3);
}

// Figure 2 (b): a thread that never persists releases and acquires a
// volatile lock while another persists P1 then P2. Without annotations the
// controller puts P1 and P2 in different epochs; ARP+VA does not.
static void figure2b() {
  ProgramBuilder b(2);
  b.persist(0, L(0));
  b.release(1, 0x50, true, 40).acquire(1, 0x50, true, 40);
  b.persist(0, L(1), 400);
  CHECK(run(b.program(), "arp").epochs == 2);
  CHECK(run(b.program(), "rcbsp").epochs == 2);
  CHECK(run(b.program(), "arp+va").epochs == 1);
  // A persistent sync is still honoured by ARP+VA.
  ProgramBuilder p(2);
  p.persist(0, L(0));
  p.release(1, 0x50, false, 40).acquire(1, 0x50, false, 40);
  p.persist(0, L(1), 400);
  CHECK(run(p.program(), "arp+va").epochs == 2);
}

// Algorithm 1's corners: a sequence point always opens an epoch; several
// acquires after one release open only one; releases alone open none.
static void algorithm1() {
  ProgramBuilder b(1);
  b.persist(0, L(0)).seqPoint(0).persist(0, L(1));
  CHECK(run(b.program(), "arp").epochs == 2);
  CHECK(run(b.program(), "arp+va").epochs == 2);
  ProgramBuilder v(1);
  v.persist(0, L(0)).seqPoint(0, true).persist(0, L(1));
  CHECK(run(v.program(), "arp").epochs == 2);
  CHECK(run(v.program(), "arp+va").epochs == 1);
  ProgramBuilder c(1);
  c.persist(0, L(0)).release(0, 1).acquire(0, 2).acquire(0, 3);
  c.persist(0, L(1)).release(0, 4).release(0, 5).persist(0, L(2));
  CHECK(run(c.program(), "arp").epochs == 2);
}

// Delegated ordering across threads: a persist after an acquire is written
// after the persist before the release it read, even when the acquiring
// core's buffer could drain first. Ideal keeps no such order, which shows
// the check can fail.
static void crossThread() {
  ProgramBuilder b(2);
  // Core 0 has a long run of persists in one row before X and the release;
  // core 1's persist Y follows its acquire of that release.
  for (unsigned i = 0; i < 40; i++)
    b.persist(0, L(8) + 64 * (i % 16) + 8192 * (i / 16));
  b.persist(0, L(0)).release(0, 0x10);
  b.acquire(1, 0x10).persist(1, L(1));
  std::vector<Write> log;
  run(b.program(), "arp", &log);
  const Write *x = find(log, L(0)), *y = find(log, L(1));
  CHECK(x && y && y->start >= x->done);
  std::vector<Write> ideal;
  run(b.program(), "ideal", &ideal);
  x = find(ideal, L(0)), y = find(ideal, L(1));
  CHECK(x && y && y->epoch == x->epoch); // unordered: the same epoch
  // And every write of an epoch starts after all writes of earlier epochs.
  for (const Write &w : log)
    for (const Write &u : log)
      if (u.epoch < w.epoch)
        CHECK(w.start >= u.done);
}

// SCP: one persist per epoch, every write after the previous one finished.
// Ideal: 64 per epoch and faster.
static void scpIdeal() {
  ProgramBuilder b(1);
  for (unsigned i = 0; i < 640; i++)
    b.persist(0, L(i % 64) + 64 * (i / 64), 10);
  std::vector<Write> log;
  Stats scp = run(b.program(), "scp", &log);
  CHECK(scp.persists == 640 && scp.epochs == 640);
  for (size_t i = 1; i < log.size(); i++)
    CHECK(log[i].start >= log[i - 1].done);
  Stats ideal = run(b.program(), "ideal");
  CHECK(ideal.epochs == 10);
  CHECK(ideal.persistsPerEpoch() == 64.0);
  CHECK(ideal.timePs < scp.timePs);
  // With nothing to order, ARP is Ideal's single epoch.
  CHECK(run(b.program(), "arp").epochs == 1);
}

// FR-FCFS: writes alternating between two rows of one bank hit the open
// row when the epoch lets the controller reorder them, and miss every
// time when SCP forbids it.
static void rowBuffer() {
  Machine m = machinePreset("pcm");
  uint64_t rowStride = (uint64_t)m.rowBytes * m.banks; // same bank, next row
  ProgramBuilder b(1);
  for (unsigned i = 0; i < 32; i++)
    b.persist(0, (i % 2) * rowStride + 64 * (i / 2));
  Stats scp = run(b.program(), "scp");
  Stats ideal = run(b.program(), "ideal");
  CHECK(scp.rowMisses == 32);
  CHECK(ideal.rowMisses <= 4);
  CHECK(ideal.missRate() < scp.missRate());
  CHECK(ideal.timePs < scp.timePs);
}

// A full persist buffer stalls its core; more buffer, less stall.
static void backPressure() {
  ProgramBuilder b(1);
  for (unsigned i = 0; i < 200; i++)
    b.persist(0, L(i));
  Machine small = machinePreset("pcm");
  small.persistBuffer = 4;
  Machine big = machinePreset("pcm");
  big.persistBuffer = 256;
  Stats s = run(b.program(), "scp", nullptr, small);
  Stats g = run(b.program(), "scp", nullptr, big);
  CHECK(s.coreStallPs > 0);
  CHECK(g.coreStallPs < s.coreStallPs);
}

// Same program, same result; and the ordering SCP < RCBSP <= ARP <=
// ARP+VA in persists per epoch on a mixed program.
static void determinismAndOrder() {
  ProgramBuilder b(3);
  for (unsigned k = 0; k < 50; k++) {
    b.acquire(0, 0x10, false, 5).persist(0, L(k % 7) + 64 * (k % 3));
    b.persist(0, L(8 + k % 5)).release(0, 0x10, false, 5);
    b.acquire(1, 0x10, false, 5).persist(1, L(20 + k % 9));
    b.release(1, 0x10, false, 5);
    b.release(2, 0x30, true, 3).acquire(2, 0x30, true, 3);
  }
  const Program &P = b.program();
  Stats a = run(P, "arp"), a2 = run(P, "arp");
  CHECK(a.timePs == a2.timePs && a.epochs == a2.epochs &&
        a.rowMisses == a2.rowMisses);
  double scp = run(P, "scp").persistsPerEpoch();
  double rc = run(P, "rcbsp").persistsPerEpoch();
  double va = run(P, "arp+va").persistsPerEpoch();
  CHECK(scp == 1.0);
  CHECK(scp < rc);
  CHECK(rc <= a.persistsPerEpoch());
  CHECK(a.persistsPerEpoch() <= va);
}

// A persist is a store: a line written by 4 stores is 4 persists, one
// epoch each under SCP, one write between barriers elsewhere; stores to a
// line queued in the same epoch combine into one write.
static void storesAndCombining() {
  ProgramBuilder b(1);
  b.persist(0, L(0), 0, 4).persist(0, L(1), 0, 4).persist(0, L(0), 0, 2);
  Stats scp = run(b.program(), "scp"), arp = run(b.program(), "arp");
  CHECK(scp.persists == 10 && scp.epochs == 10 && scp.writes == 10);
  CHECK(arp.persists == 10 && arp.epochs == 1);
  CHECK(arp.writes <= 3 && arp.writes >= 2);
}

// A full barrier holds its core (fenceCycles); one-way barriers do not.
static void fenceStalls() {
  ProgramBuilder f(1), o(1);
  for (unsigned i = 0; i < 20; i++) {
    f.persist(0, L(i)).seqPoint(0);
    o.persist(0, L(i)).release(0, 0x10).acquire(0, 0x20);
  }
  // On memory too fast to matter, the time is the core's own: 20 fences of
  // fenceCycles each, or none.
  Machine fast = machinePreset("pcm");
  uint64_t cyc = (uint64_t)(1000 / fast.cpuGHz);
  fast.tWP = fast.tRCD = fast.tCWD = fast.tBURST = fast.tCK = 1;
  fast.drainPs = 1;
  Stats full = run(f.program(), "arp", nullptr, fast);
  Stats oneWay = run(o.program(), "arp", nullptr, fast);
  const Machine &m = fast;
  CHECK(full.timePs >= 20 * m.fenceCycles * cyc);
  CHECK(oneWay.timePs < 20 * m.fenceCycles * cyc);
}

static void badInput() {
  bool threw = false;
  try {
    makeModel("tso");
  } catch (const std::exception &) {
    threw = true;
  }
  CHECK(threw);
  threw = false;
  try {
    machinePreset("dram");
  } catch (const std::exception &) {
    threw = true;
  }
  CHECK(threw);
}

int main() {
  figure3a();
  figure3b();
  figure2a();
  figure2b();
  algorithm1();
  crossThread();
  scpIdeal();
  rowBuffer();
  backPressure();
  determinismAndOrder();
  storesAndCombining();
  fenceStalls();
  badInput();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("sim: all checks passed\n");
  return 0;
}
