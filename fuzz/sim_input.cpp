// SPDX-License-Identifier: Apache-2.0
//
// sim_input.cpp -- libFuzzer target: what pmkit-sim reads, its options and
// its trace. The input's first line holds the options, separated by
// spaces (as `pmkit-sim` gets them, the trace's name appended); the rest
// is the trace. The options go through the command line's parser
// (sim/args.cpp), the trace through the reader and fromTrace
// (sim/program.cpp), as `pmkit sim` runs them. A program small enough is
// then simulated under the chosen models, so that what the parser and the
// builder let through is also something the machine can run.
//
// Refusals are std::invalid_argument (options) or pmx::Error (trace), one
// line each; any other exception, or a crash, is a finding.

#include "sim.h"
#include "trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// Bounds on the work one input may cause (the machine's time grows with
// the ops it runs; background threads replay theirs without end while
// others run, which only a real program's order ends).
constexpr uint64_t MaxLineOps = 1 << 16; // ops fromTrace may build
constexpr size_t MaxSimOps = 4096;       // ops simulated

void oneLine(const char *what, const std::string &msg) {
  if (msg.find('\n') != std::string::npos) {
    fprintf(stderr, "fuzz-sim-input: %s of more than one line: %s\n", what,
            msg.c_str());
    abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nl = (const uint8_t *)memchr(data, '\n', size);
  size_t argLen = nl ? (size_t)(nl - data) : size;
  std::vector<std::string> args;
  std::string line((const char *)data, argLen), word;
  for (size_t i = 0; i <= line.size(); i++)
    if (i == line.size() || line[i] == ' ') {
      if (!word.empty())
        args.push_back(word);
      word.clear();
    } else {
      word += line[i];
    }
  args.push_back("input.trace");
  pms::Invocation I;
  try {
    I = pms::parseArgs(args);
  } catch (const std::invalid_argument &e) {
    oneLine("an option error", e.what());
    return 0;
  }
  if (I.help || I.list)
    return 0;
  const uint8_t *trace = nl ? nl + 1 : data + size;
  try {
    pmx::Trace T(trace, size - (size_t)(trace - data), I.trace);
    uint64_t lineOps = 0;
    for (const pmx::Event &e : T.events)
      if (e.writes())
        lineOps += e.length() / 64 + 2;
    if (lineOps > MaxLineOps)
      return 0;
    pms::Program P = pms::fromTrace(T, I.trace, I.build);
    size_t ops = 0;
    bool background = false;
    for (const pms::Thread &t : P.threads) {
      ops += t.ops.size();
      background |= t.background;
    }
    if (ops > MaxSimOps || background)
      return 0;
    for (const std::string &name : I.models) {
      pms::Stats s = pms::simulate(P, *pms::makeModel(name), I.machine);
      if (s.persists != P.persists()) { // every model receives them all
        fprintf(stderr, "fuzz-sim-input: %s received %llu of %llu persists\n",
                name.c_str(), (unsigned long long)s.persists,
                (unsigned long long)P.persists());
        abort();
      }
    }
  } catch (const pmx::Error &e) {
    oneLine("a trace error", e.what());
  }
  return 0;
}
