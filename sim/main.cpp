// SPDX-License-Identifier: Apache-2.0
//
// main.cpp -- the command line of pmkit-sim (`pmkit sim` runs it):
//   pmkit-sim [--model M[,M...]|all] [--machine pcm|optane] [--set K=V]...
//             [--event-cycles N] [--lines] [--coalesce] [--mark NAME]
//             [--background NAME] [--json FILE] TRACE
// simulates the trace under each model on one machine and prints a table:
// persists per epoch, row-buffer miss rate and execution time, each also
// relative to the first model given. Exit 0, or 2 with one line on bad
// input (options: args.cpp; the trace: tracereader/trace.cpp).

#include "sim.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

using namespace pms;

namespace {

const char *usage =
    "usage: pmkit sim [options] TRACE\n"
    "  --model M[,M...]  models to compare, the first is the baseline\n"
    "                    (default scp,rcbsp,arp,arp+va,ideal; 'all' too)\n"
    "  --machine NAME    pcm (default: PCM at 533 MHz) or optane\n"
    "  --set K=V         override a machine parameter (times in ps):\n"
    "                    banks, row-bytes, write-queue, persist-buffer,\n"
    "                    tCK, tRCD, tWP, tCWD, tBURST, drain, cpu-ghz,\n"
    "                    transfer-cycles, fence-cycles\n"
    "  --event-cycles N  core cycles per traced event (default 25)\n"
    "  --lines           count a cache line written as one persist (default:\n"
    "                    every 8-byte store is one, as in the paper)\n"
    "  --coalesce        stores to the line of the thread's previous persist\n"
    "                    share its persist buffer entry (default: an entry\n"
    "                    per store)\n"
    "  --mark NAME       only what runs inside the operation marked NAME\n"
    "                    (pmkit_mark_begin/end), e.g. a measured phase\n"
    "  --background NAME threads that begin an operation marked NAME run\n"
    "                    their ops again and again until the others finish\n"
    "                    (antagonists); their time is not the program's\n"
    "  --json FILE       also write the results as JSON\n"
    "  --list            list the models and machines and stop\n";

[[noreturn]] void bad(const std::string &msg) {
  fprintf(stderr, "pmkit sim: %s\n", msg.c_str());
  exit(2);
}

void writeJson(const std::string &path, const std::string &trace,
               const Machine &m, const BuildOptions &B,
               const std::vector<Stats> &all) {
  std::ofstream f(path);
  if (!f)
    bad("cannot write " + path);
  f << "{\n  \"trace\": \"" << trace << "\",\n  \"machine\": {\"name\": \""
    << m.name << "\", \"cpu_ghz\": " << m.cpuGHz << ", \"banks\": " << m.banks
    << ", \"row_bytes\": " << m.rowBytes
    << ", \"write_queue\": " << m.writeQueue
    << ", \"persist_buffer\": " << m.persistBuffer << ", \"tCK_ps\": " << m.tCK
    << ", \"tRCD_ps\": " << m.tRCD << ", \"tWP_ps\": " << m.tWP
    << ", \"tCWD_ps\": " << m.tCWD << ", \"tBURST_ps\": " << m.tBURST
    << ", \"drain_ps\": " << m.drainPs
    << ", \"transfer_cycles\": " << m.transferCycles
    << ", \"fence_cycles\": " << m.fenceCycles
    << "},\n  \"event_cycles\": " << B.eventCycles
    << ",\n  \"coalesce\": " << (B.coalesce ? "true" : "false")
    << ",\n  \"models\": [\n";
  for (size_t i = 0; i < all.size(); i++) {
    const Stats &s = all[i];
    f << "    {\"model\": \"" << s.model << "\", \"persists\": " << s.persists
      << ", \"writes\": " << s.writes << ", \"epochs\": " << s.epochs
      << ", \"persists_per_epoch\": " << s.persistsPerEpoch()
      << ", \"row_hits\": " << s.rowHits << ", \"row_misses\": " << s.rowMisses
      << ", \"miss_rate\": " << s.missRate() << ", \"time_ps\": " << s.timePs
      << ", \"core_stall_ps\": " << s.coreStallPs
      << ", \"sync_msgs\": " << s.syncMsgs << ", \"pkc\": " << s.pkc << "}"
      << (i + 1 < all.size() ? ",\n" : "\n");
  }
  f << "  ]\n}\n";
}

} // namespace

int main(int argc, char **argv) {
  Invocation I;
  try {
    I = parseArgs(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception &e) {
    bad(e.what());
  }
  if (I.help) {
    fputs(usage, stdout);
    return 0;
  }
  if (I.list) {
    for (const ModelEntry &e : modelTable())
      printf("model   %-8s %s\n", e.name, e.make()->help());
    for (const std::string &p : machinePresets())
      printf("machine %s\n", p.c_str());
    return 0;
  }
  const Machine &m = I.machine;
  const BuildOptions &B = I.build;
  const std::string &trace = I.trace, &json = I.json;
  std::vector<std::unique_ptr<Model>> ms;
  try {
    for (const std::string &n : I.models)
      ms.push_back(makeModel(n));
  } catch (const std::exception &e) {
    bad(e.what());
  }
  Program P;
  try {
    P = fromTrace(trace, B);
  } catch (const std::exception &e) {
    bad(e.what());
  }
  if (!P.persists())
    bad(trace + " has no persists to simulate (was the program traced "
                "with its pool registered?)");
  std::vector<Stats> all;
  try {
    for (auto &mod : ms)
      all.push_back(simulate(P, *mod, m));
  } catch (const std::exception &e) {
    bad(e.what());
  }
  size_t syncs = 0;
  for (const Thread &t : P.threads)
    for (const Op &o : t.ops)
      syncs += o.kind != Op::Persist;
  printf("%s: %zu threads, %llu persists, %zu sync ops; machine %s\n",
         trace.c_str(), P.threads.size(), (unsigned long long)P.persists(),
         syncs, m.name.c_str());
  printf("%-8s %10s %8s %10s %9s %12s %8s %7s\n", "model", "persists", "epochs",
         "pers/epoch", "row miss", "time (us)", "speedup", "PKC");
  for (const Stats &s : all) {
    double speedup = s.timePs ? (double)all[0].timePs / (double)s.timePs : 0;
    printf("%-8s %10llu %8llu %10.2f %8.1f%% %12.1f %7.2fx %7.1f\n",
           s.model.c_str(), (unsigned long long)s.persists,
           (unsigned long long)s.epochs, s.persistsPerEpoch(),
           100 * s.missRate(), (double)s.timePs / 1e6, speedup, s.pkc);
  }
  if (!json.empty())
    writeJson(json, trace, m, B, all);
  return 0;
}
