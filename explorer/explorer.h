// SPDX-License-Identifier: Apache-2.0
//
// explorer.h -- the pieces of pmkit-explore, the crash-state explorer: a
// trace reader (trace.cpp), persistency models registered by name
// (models.cpp), the engine that walks the trace and builds the crash images
// a model allows (engine.cpp), checkers that run the user's check on an
// image (checkers.cpp), and the command line with its report (main.cpp).
// docs/explorer.md explains the models and the output.

#ifndef PMKIT_EXPLORER_H
#define PMKIT_EXPLORER_H

#include "pmkit/pmkit.h" // PMKIT_FLUSH_* kinds in flush events
#include "pmkit/trace_format.h"
#include "trace.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <unordered_map>
#include <vector>

namespace pmx {

// ---- models (models.cpp) --------------------------------------------------

// A persistency model: which crash images a trace allows at a point. All
// models share one engine; a model says how big a unit of independent
// persistence is and whether caches are volatile (then the Px86 flush and
// fence rules bound what must have persisted; otherwise every write is
// persistent as soon as it is visible).
class Model {
public:
  virtual ~Model() = default;
  virtual const char *name() const = 0;
  virtual const char *help() const = 0;
  // log2 of the bytes in one unit: 3 (8-byte locations) or 6 (lines).
  virtual unsigned unitShift() const = 0;
  virtual bool volatileCaches() const = 0;
  // Whether a non-temporal store persists only at its thread's next fence
  // (it waits in a write-combining buffer no model of caches covers); no
  // for strict persistency, where every store persists in memory order.
  virtual bool ntWaitsForFence() const { return true; }
  virtual const char *defaultPoints() const = 0;
  // Whether persists are also ordered across locations by the trace's
  // sequence points and persistent release/acquire pairs (arp): a crash
  // image then keeps, with each write, every write ordered before it.
  virtual bool persistOrder() const { return false; }
};

// Acquire-release persistency's persist memory order (Kolli et al.,
// ISCA'17, equations 1-3) over a trace's writes, built as the engine walks
// the events: each write gets the frontier of its thread, the number of
// each thread's first writes ordered before it. A sequence point orders all
// of a thread's earlier writes before its later ones; a persistent release
// publishes them, with what was ordered before them, to the acquire that
// reads it (the last release on that variable before the acquire); volatile
// syncs order nothing. order.cpp.
class PersistOrder {
public:
  explicit PersistOrder(const Trace &T);
  // Called for every event, in order.
  void observe(size_t i);
  bool isWrite(size_t ev) const { return front_[ev] != NONE; }
  uint32_t thread(size_t ev) const { return T.events[ev].tid; }
  uint32_t index(size_t ev) const { return idx_[ev]; } // in its thread
  // The frontier of a write: front(ev)[u] of thread u's first writes are
  // ordered before it (T.threads + 1 entries).
  const uint32_t *front(size_t ev) const {
    return fronts_.data() + (size_t)front_[ev] * width_;
  }
  // The events of thread u's writes, in program order.
  const std::vector<uint32_t> &writesOf(uint32_t u) const { return writes_[u]; }
  size_t width() const { return width_; }

private:
  static constexpr uint32_t NONE = UINT32_MAX;
  const Trace &T;
  size_t width_;
  std::vector<uint32_t> idx_, front_;      // per event
  std::vector<uint32_t> fronts_;           // interned frontiers, width_ each
  std::vector<std::vector<uint32_t>> cur_; // per thread
  std::vector<uint32_t> curId_;            // interned id of cur_, or NONE
  std::vector<std::vector<uint32_t>> writes_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> released_;
  // Per thread: the release its read-modify-write's acquire reads from.
  std::unordered_map<uint32_t, std::pair<uint64_t, std::vector<uint32_t>>>
      rmwPrior_;
};

struct ModelEntry {
  const char *name;
  std::unique_ptr<Model> (*make)();
};
const std::vector<ModelEntry> &modelTable();
std::unique_ptr<Model> makeModel(const std::string &name); // throws Error

} // namespace pmx

// ---- checkers (checkers.cpp) ----------------------------------------------

namespace pmx {

// A deviation of a crash image from the fully visible image at its point:
// `len` bytes at `addr` hold older content.
struct Dev {
  uint64_t addr;
  std::vector<uint8_t> bytes;
};

struct Job {
  uint64_t id = 0;
  size_t pos = 0; // crash before events[pos]
  std::vector<Dev> devs;
};

struct Result {
  uint64_t id = 0;
  bool ok = false;
  bool timedOut = false;
  bool cannotRun = false; // the checker could not start (exit 2 overall)
  std::string status;     // "exit 1", "signal 11", "timed out after 10 s"
  std::string output;     // first lines of the checker's output
  // --robustness: the pool addresses the checker read (from its trace, if
  // it was built with --trace-loads); readsKnown false: it recorded none.
  std::vector<uint64_t> reads;
  bool readsKnown = false;
};

struct CheckerOptions {
  std::string command; // --check, with {pool} / {pool:N}
  std::string lib;     // --check-lib
  std::string self;    // path of this executable (fork server)
  std::string workDir;
  double timeout = 10;
  bool traceReads = false; // run the command with PMKIT_TRACE to learn reads
};

// One checker instance (one per job slot): keeps its own copy of the pool
// images in sync with the trace and checks one image at a time.
class Checker {
public:
  virtual ~Checker() = default;
  virtual Result check(const Job &job) = 0;
  // Writes the image of `job` to `path` (for the user to replay).
  virtual void save(const Job &job, const std::string &path) = 0;
  // The command that checks a saved image.
  virtual std::string reproduce(const std::string &imagePath) const = 0;
};

std::unique_ptr<Checker> makeChecker(const Trace &T, const CheckerOptions &O,
                                     unsigned slot);
// The fork server's main (pmkit-explore --fork-server ...).
int forkServerMain(int argc, char **argv);
// Waits for a child of forkChild(true) for at most `timeout` seconds,
// killing its process group when time runs out; reaps it; its wait status.
int waitWithTimeout(pid_t pid, double timeout, bool *timedOut);
// fork() for every child of the explorer (main.cpp): the child is killed,
// with its process group when ownGroup (it is then the leader of a group of
// its own), if the explorer is stopped by SIGTERM, SIGINT or SIGHUP. In the
// child, the signal mask is the one the explorer started with.
pid_t forkChild(bool ownGroup);
// Reaps a child of forkChild (retrying on EINTR); its wait status.
int reapChild(pid_t pid);
// Reads exactly n bytes from fd (retrying short reads); false at EOF or on
// an error.
bool readAll(int fd, void *p, size_t n);
// Maps an image file at its base and runs a check library on it once.
int runCheckLib(const std::string &lib, const std::string &image);

// ---- the engine and its report (engine.cpp) ---------------------------------

struct Options {
  std::string model = "x86";
  std::string points; // empty: the model's default
  uint64_t budget = 20000;
  uint64_t perPoint = 0; // 0: planned from the budget (engine.cpp)
  uint64_t seed = 1;
  unsigned jobs = 2;
  std::string mark;    // only crash points inside this operation
  std::string json;    // write the report here too
  std::string saveDir; // failing images go here
  bool robustness = false;
  bool requireExhaustive = false; // exit 2 unless every image is checked
  uint64_t stopAfter = 0;         // stop exploring after this many failures
  unsigned maxReports = 3;
  bool progress = false;
  std::string recordCommand; // how the trace was made, for the report
  CheckerOptions checker;
};

// Explores a trace; prints the report; returns the exit status (0 no
// failure found, 1 a failure or robustness violation). The report says
// whether the exploration was exhaustive.
int explore(const Trace &T, const Options &O);

} // namespace pmx

#endif // PMKIT_EXPLORER_H
