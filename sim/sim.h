// SPDX-License-Identifier: Apache-2.0
//
// sim.h -- pmkit-sim, the trace-driven persist-ordering simulator of arp
// mode (Kolli et al., ISCA'17, sections 5 and 6). A program is each
// thread's persists, acquires, releases and sequence points in program
// order (program.cpp builds it from a trace, tests build it by hand). Each
// thread runs on a core of its own that issues into a persist buffer; the
// buffers drain to a PM controller under delegated persist ordering (an
// acquire leaves its buffer only after the release it read from has left
// its own); the controller numbers epochs as each persistency model says
// (models.cpp: SCP, RCBSP, ARP, ARP+VA, Ideal) and writes one epoch after
// another, FR-FCFS over banks with open rows (controller in sim.cpp).
// main.cpp is the command line; docs/modes/arp.md documents every timing
// parameter and where its value comes from.

#ifndef PMKIT_SIM_H
#define PMKIT_SIM_H

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pmx {
class Trace; // tracereader/trace.h
}

namespace pms {

// ---- the program (program.cpp) ---------------------------------------------

struct Op {
  enum Kind : uint8_t { Persist, Acquire, Release, SeqPoint };
  Kind kind = Persist;
  bool vol = false;    // a volatile_sync access: no persist semantics
  uint32_t work = 0;   // core cycles spent before the op (untraced work)
  uint64_t addr = 0;   // Persist: the cache line's address; sync: variable
  int32_t srcTid = -1; // Acquire: the release it reads from, if any
  uint32_t srcIdx = 0;
  uint32_t stores = 1; // Persist: the persists (stores) it stands for
};

struct Thread {
  std::vector<Op> ops;
  // A background thread (the paper's antagonists) runs its ops again and
  // again until every other thread has finished, and its time is not the
  // program's.
  bool background = false;
  uint32_t tid = 0;      // the trace's thread id
  uint64_t tailWork = 0; // cycles after the last op
};

struct Program {
  std::vector<Thread> threads;
  uint64_t persists() const;
};

// How a trace becomes a Program: every traced event costs the core
// `eventCycles` cycles (the work between traced events is not traced);
// loads cost the same but produce no op. A persist is a store, as in the
// paper: an 8-byte store is one, a 64-byte memcpy eight; with `lines`, a
// persist is a cache line written instead.
struct BuildOptions {
  uint32_t eventCycles = 25;
  bool lines = false;
  bool coalesce = false; // stores to the line of the thread's previous
                         // op share its persist buffer entry
  // Only events between the first begin and end of this mark (any thread),
  // e.g. a benchmark's measured phase without its set-up; "" = all.
  std::string mark;
  // Threads that begin an operation of this mark are background threads.
  std::string background;
};

// Builds the program of a trace file; throws std::runtime_error. A trace
// without its END block (the program did not exit normally) is refused.
Program fromTrace(const std::string &path, const BuildOptions &O);
// The same from a trace already read, named `name` in errors.
Program fromTrace(const pmx::Trace &T, const std::string &name,
                  const BuildOptions &O);

// A program written by hand (tests, the paper's Figure 3): ops are
// appended in the global order of the calls, and each acquire reads from
// the last release on its variable appended before it, by any thread.
class ProgramBuilder {
public:
  explicit ProgramBuilder(unsigned threads);
  ProgramBuilder &persist(unsigned t, uint64_t line, uint32_t work = 0,
                          uint32_t stores = 1);
  ProgramBuilder &acquire(unsigned t, uint64_t var, bool vol = false,
                          uint32_t work = 0);
  ProgramBuilder &release(unsigned t, uint64_t var, bool vol = false,
                          uint32_t work = 0);
  ProgramBuilder &seqPoint(unsigned t, bool vol = false, uint32_t work = 0);
  const Program &program() const { return P; }

private:
  Program P;
  std::unordered_map<uint64_t, std::pair<int32_t, uint32_t>> lastRelease;
  ProgramBuilder &push(unsigned t, Op::Kind k, uint64_t addr, bool vol,
                       uint32_t work, uint32_t stores = 1);
};

// ---- persistency models (models.cpp) ---------------------------------------

// What the controller receives for an op.
enum class Msg : uint8_t { Persist, Full, Acq, Rel };

class Model {
public:
  virtual ~Model() = default;
  virtual const char *name() const = 0;
  virtual const char *help() const = 0;
  // The messages an op puts in its core's persist buffer, in order; none:
  // the op is not sent (it still orders the buffer if tracked()).
  virtual void lower(const Op &o, std::vector<Msg> &out) const = 0;
  // Whether a sync op keeps cross-thread order in the persist buffers
  // (an acquire waits for its release to drain).
  virtual bool tracked(const Op &o) const = 0;
  // Persists per epoch the controller enforces regardless of barriers (0:
  // epochs come from barriers only). Ideal uses the write queue's size.
  virtual unsigned fixedEpoch() const { return 0; }
  // Whether each store of a persist op is sent on its own (SCP: one
  // persist per epoch even for stores that share a line).
  virtual bool perStore() const { return false; }
};

struct ModelEntry {
  const char *name;
  std::unique_ptr<Model> (*make)();
};
const std::vector<ModelEntry> &modelTable();
std::unique_ptr<Model> makeModel(const std::string &name); // throws

// ---- machine and results (sim.cpp)
// -------------------------------------------

// All times in picoseconds unless the name says otherwise.
struct Machine {
  std::string name;
  double cpuGHz = 2.0; // core clock (the paper's Table 3)
  // An acquire that reads another core's release waits for the line to
  // come over: the paper's L2 hit latency (Table 3: 16 ns).
  unsigned transferCycles = 32;
  // A full fence holds its core until earlier stores reach the L2: the
  // same latency. One-way acquires and releases do not hold it.
  unsigned fenceCycles = 32;
  unsigned persistBuffer = 32; // entries per core
  uint64_t drainPs = 10000;    // core to controller, per entry
  unsigned writeQueue = 64;    // the controller's write queue
  unsigned banks = 8;          // banks of the one rank
  unsigned rowBytes = 1024;    // row buffer (the paper's 1 KB)
  uint64_t tCK = 1875;         // bus clock: 533 MHz
  uint64_t tRCD = 55000;       // open a row (array read)
  uint64_t tWP = 150000;       // write a dirty row back to the array
  uint64_t tCWD = 7500;        // write command to data (4 tCK)
  uint64_t tBURST = 7500;      // one 64-byte line (BL8 = 4 tCK)
};
// "pcm" (default) or "optane"; throws on an unknown name.
Machine machinePreset(const std::string &name);
std::vector<std::string> machinePresets();

struct Stats {
  std::string model;
  uint64_t persists = 0; // persists (stores) the controller received
  uint64_t writes = 0;   // line writes it issued (after combining)
  uint64_t epochs = 0;   // epochs that held at least one persist
  uint64_t rowHits = 0, rowMisses = 0; // per write
  uint64_t timePs = 0;      // until every core finished and every write
  uint64_t coreStallPs = 0; // summed over cores: waiting for a full buffer
  uint64_t syncMsgs = 0;    // barriers the controller received
  double persistsPerEpoch() const {
    return epochs ? (double)persists / (double)epochs : 0;
  }
  double missRate() const {
    uint64_t n = rowHits + rowMisses;
    return n ? (double)rowMisses / (double)n : 0;
  }
  // Persists per 1000 core cycles of the threads that persist.
  double pkc = 0;
};

// One write the controller issued (for tests and --log).
struct Write {
  uint64_t line, epoch;
  uint64_t start, done; // issued to its bank; data written
  bool hit;             // row-buffer hit
};

// Why the machine cannot run (bad --set values), or "".
std::string machineProblem(const Machine &C);

// Runs the program under the model; deterministic. With `log`, every
// write is appended to it in issue order.
Stats simulate(const Program &P, const Model &M, const Machine &C,
               std::vector<Write> *log = nullptr);

// ---- the command line (args.cpp) -------------------------------------------

struct Invocation {
  std::vector<std::string> models = {"scp", "rcbsp", "arp", "arp+va", "ideal"};
  Machine machine;
  BuildOptions build;
  std::string json, trace;
  bool help = false, list = false; // the rest is not parsed then
};
// pmkit-sim's arguments (without the program name), every value checked;
// throws std::invalid_argument with one line.
Invocation parseArgs(const std::vector<std::string> &args);

} // namespace pms

#endif // PMKIT_SIM_H
