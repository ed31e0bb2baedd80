// SPDX-License-Identifier: Apache-2.0
//
// args.cpp -- pmkit-sim's command line, parsed and validated (main.cpp
// runs it; fuzz/sim_input.cpp feeds it arbitrary words). Every value is
// checked here, so that a bad option is one line on stderr and never a
// machine the simulator cannot run.

#include "sim.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace pms {

namespace {

[[noreturn]] void bad(const std::string &msg) {
  throw std::invalid_argument(msg);
}

// A whole decimal number from 0 to max (no sign, no spaces).
uint64_t number(const std::string &s, const std::string &what, uint64_t max) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    bad(what + " needs a whole number, not '" + s + "'");
  errno = 0;
  unsigned long long v = strtoull(s.c_str(), nullptr, 10);
  if (errno || v > max)
    bad(what + " needs a whole number up to " + std::to_string(max) +
        ", not '" + s + "'");
  return v;
}

void setParam(Machine &m, const std::string &kv) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos)
    bad("--set needs K=V, not '" + kv + "'");
  std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
  if (k == "cpu-ghz") {
    char *end = nullptr;
    double g = strtod(v.c_str(), &end);
    if (v.empty() || *end || !(g >= 0.01 && g <= 100))
      bad("cpu-ghz needs a number from 0.01 to 100");
    m.cpuGHz = g;
    return;
  }
  // Counts are bounded so that the machine fits in memory, times (ps) so
  // that no sum of them comes near overflowing.
  const uint64_t ps = 1000000000000ull, cycles = 1000000;
  struct {
    const char *name;
    uint64_t *u64;
    unsigned *u32;
    uint64_t max;
  } fields[] = {
      {"banks", nullptr, &m.banks, 4096},
      {"row-bytes", nullptr, &m.rowBytes, 1u << 20},
      {"write-queue", nullptr, &m.writeQueue, 1u << 20},
      {"persist-buffer", nullptr, &m.persistBuffer, 1u << 20},
      {"transfer-cycles", nullptr, &m.transferCycles, cycles},
      {"fence-cycles", nullptr, &m.fenceCycles, cycles},
      {"tCK", &m.tCK, nullptr, ps},
      {"tRCD", &m.tRCD, nullptr, ps},
      {"tWP", &m.tWP, nullptr, ps},
      {"tCWD", &m.tCWD, nullptr, ps},
      {"tBURST", &m.tBURST, nullptr, ps},
      {"drain", &m.drainPs, nullptr, ps},
  };
  for (auto &f : fields)
    if (k == f.name) {
      uint64_t n = number(v, k, f.max);
      if (f.u64)
        *f.u64 = n;
      else
        *f.u32 = (unsigned)n;
      return;
    }
  bad("unknown machine parameter '" + k + "' (see --help)");
}

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty())
      out.push_back(x);
  return out;
}

} // namespace

Invocation parseArgs(const std::vector<std::string> &args) {
  Invocation I;
  I.machine = machinePreset("pcm");
  std::vector<std::string> sets;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string &a = args[i];
    auto val = [&]() -> const std::string & {
      if (i + 1 >= args.size())
        bad(a + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      I.help = true;
      return I; // what follows is not looked at
    } else if (a == "--list") {
      I.list = true;
      return I;
    } else if (a == "--model") {
      const std::string &v = val();
      if (v != "all")
        I.models = split(v);
      if (I.models.empty())
        bad("--model needs at least one model");
    } else if (a == "--machine") {
      try {
        I.machine = machinePreset(val());
      } catch (const std::runtime_error &e) {
        bad(e.what());
      }
    } else if (a == "--set") {
      sets.push_back(val());
    } else if (a == "--event-cycles") {
      I.build.eventCycles = (uint32_t)number(val(), a, 1000000);
    } else if (a == "--mark") {
      I.build.mark = val();
    } else if (a == "--background") {
      I.build.background = val();
    } else if (a == "--lines") {
      I.build.lines = true;
    } else if (a == "--coalesce") {
      I.build.coalesce = true;
    } else if (a == "--json") {
      I.json = val();
    } else if (!a.empty() && a[0] == '-') {
      bad("unknown option " + a + " (see --help)");
    } else if (I.trace.empty()) {
      I.trace = a;
    } else {
      bad("one trace at a time (got '" + I.trace + "' and '" + a + "')");
    }
  }
  if (I.trace.empty())
    bad("no trace given (see --help)");
  if (!I.build.background.empty() && I.build.eventCycles == 0)
    bad("--background needs --event-cycles of 1 or more (a background "
        "thread whose ops take no time would replay them forever)");
  for (const std::string &s : sets)
    setParam(I.machine, s);
  std::string why = machineProblem(I.machine);
  if (!why.empty())
    bad("bad machine parameters: " + why);
  for (const std::string &n : I.models)
    try {
      makeModel(n);
    } catch (const std::runtime_error &e) {
      bad(e.what());
    }
  return I;
}

} // namespace pms
