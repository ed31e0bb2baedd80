// SPDX-License-Identifier: Apache-2.0
//
// main.cpp -- the pmkit-explore command (`pmkit explore` runs it): records a
// trace of a program built with `pmkit cc --trace`, or reads one, and
// explores its crash images (engine.cpp). Also replays one saved image with
// an in-process checker (--image) and, internally, runs as the fork server
// of that checker (--fork-server). Exit status: 0 every image consistent,
// 1 an inconsistent image, 2 a usage or environment error.

#include "explorer.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace pmx;

namespace {

const char *Usage =
    "usage: pmkit explore [OPTIONS] (--check 'CMD {pool}' | --check-lib LIB)\n"
    "                     (-- PROG ARGS... | --trace FILE)\n"
    "       pmkit explore --check-lib LIB --image IMAGE\n"
    "       pmkit explore --dump (-- PROG ARGS... | --trace FILE)\n"
    "\n"
    "Run PROG (built with `pmkit cc --trace`) recording its PM writes, then\n"
    "check every crash image a persistency model allows.\n"
    "\n"
    "  --model M        x86 (default), x86-line, eadr, strict, arp\n"
    "  --points P       crash points: fences, stores, marks, all\n"
    "                   (default: fences for x86, stores for eadr)\n"
    "  --budget N       check at most N distinct images (default 20000)\n"
    "  --per-point K    images per crash point; a point with more is\n"
    "                   sampled, and the verdict says so (default: planned\n"
    "                   from the budget: small points enumerated, the rest\n"
    "                   shared by the sampled ones)\n"
    "  --require-exhaustive  exit 2 unless every crash image of every\n"
    "                   crash point can be checked\n"
    "  --seed S         seed for sampling points and images (default 1)\n"
    "  --stop-after N   stop exploring once N images failed (the images\n"
    "                   before are those of a full run)\n"
    "  --jobs J         checkers run in parallel (default 2)\n"
    "  --mark NAME      only crash points inside operations marked NAME\n"
    "  --check CMD      shell command checking an image; {pool} is replaced\n"
    "                   by the image's path ({pool:N} for pool N); exit 0 =\n"
    "                   consistent\n"
    "  --check-lib LIB  shared library exporting int pmkit_check(void *base),\n"
    "                   run in forked children (faster)\n"
    "  --timeout SEC    per image (default 10); --run-timeout SEC for PROG\n"
    "                   while tracing (default 600)\n"
    "  --trace FILE     explore this trace instead of running PROG\n"
    "  --keep-trace F   write the recorded trace to F and keep it\n"
    "  --save-dir DIR   where failing images go (default\n"
    "                   ./pmkit-explore-failures)\n"
    "  --max-reports N  failures reported in full (default 3)\n"
    "  --json FILE      also write the report as JSON (-: one line on stdout)\n"
    "  --progress / --no-progress   progress bar (default: on a terminal)\n"
    "  --dump           print the trace's events, one per line, and stop\n"
    "  --robustness     also report images no strict-persistency execution\n"
    "                   produces, judged on what the checker reads when it is\n"
    "                   built with --trace --trace-loads (else on the whole\n"
    "                   image), naming the write that needed a flush or "
    "fence\n";

struct Args {
  Options O;
  std::string trace, keepTrace, image;
  bool dump = false;
  double runTimeout = 600;
  std::vector<std::string> prog;
};

[[noreturn]] void usage(const std::string &why) {
  fprintf(stderr, "pmkit explore: %s\n%s", why.c_str(), Usage);
  exit(2);
}

uint64_t number(const std::string &opt, const char *v) {
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 0);
  if (errno || !*v || *end || v[0] == '-')
    usage(opt + " needs a non-negative integer, not '" + v + "'");
  return n;
}

double seconds(const std::string &opt, const char *v) {
  char *end;
  double d = strtod(v, &end);
  if (!*v || *end || !(d > 0))
    usage(opt + " needs a positive number of seconds, not '" + v + "'");
  return d;
}

Args parse(int argc, char **argv) {
  Args A;
  A.O.progress = isatty(2);
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--") {
      for (i++; i < argc; i++)
        A.prog.push_back(argv[i]);
      break;
    }
    if (a == "-h" || a == "--help") {
      fputs(Usage, stdout);
      exit(0);
    }
    if (a == "--progress") {
      A.O.progress = true;
      continue;
    }
    if (a == "--no-progress") {
      A.O.progress = false;
      continue;
    }
    if (a == "--robustness") {
      A.O.robustness = true;
      A.O.checker.traceReads = true;
      continue;
    }
    if (a == "--require-exhaustive") {
      A.O.requireExhaustive = true;
      continue;
    }
    if (a == "--dump") {
      A.dump = true;
      continue;
    }
    std::string val;
    size_t eq = a.find('=');
    std::string key = a.substr(0, eq);
    if (eq != std::string::npos)
      val = a.substr(eq + 1);
    else if (i + 1 < argc)
      val = argv[++i];
    else
      usage(a + " needs a value");
    const char *v = val.c_str();
    if (key == "--model")
      A.O.model = val;
    else if (key == "--points")
      A.O.points = val;
    else if (key == "--budget") {
      A.O.budget = number(key, v);
      if (!A.O.budget)
        usage("--budget 0 would check no image: give at least 1");
    } else if (key == "--per-point")
      A.O.perPoint = std::max<uint64_t>(2, number(key, v));
    else if (key == "--stop-after") {
      A.O.stopAfter = number(key, v);
      if (!A.O.stopAfter)
        usage("--stop-after needs at least 1 failing image");
    } else if (key == "--seed")
      A.O.seed = number(key, v);
    else if (key == "--jobs")
      A.O.jobs = (unsigned)std::max<uint64_t>(1, number(key, v));
    else if (key == "--mark")
      A.O.mark = val;
    else if (key == "--check")
      A.O.checker.command = val;
    else if (key == "--check-lib")
      A.O.checker.lib = val;
    else if (key == "--timeout")
      A.O.checker.timeout = seconds(key, v);
    else if (key == "--run-timeout")
      A.runTimeout = seconds(key, v);
    else if (key == "--trace")
      A.trace = val;
    else if (key == "--keep-trace")
      A.keepTrace = val;
    else if (key == "--save-dir")
      A.O.saveDir = val;
    else if (key == "--max-reports")
      A.O.maxReports = (unsigned)number(key, v);
    else if (key == "--json")
      A.O.json = val;
    else if (key == "--image")
      A.image = val;
    else
      usage("unknown option " + key);
  }
  return A;
}

std::string selfPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    throw Error("cannot find this executable (/proc/self/exe)");
  return std::string(buf, (size_t)n);
}

std::string makeWorkDir() {
  struct stat sb;
  std::string t = (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode))
                      ? "/dev/shm/pmkit-explore.XXXXXX"
                      : "/tmp/pmkit-explore.XXXXXX";
  if (!mkdtemp(t.data()))
    throw Error("cannot create a work directory: " +
                std::string(strerror(errno)));
  return t;
}

void removeTree(const std::string &dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  if (system(cmd.c_str()) != 0)
    fprintf(stderr, "pmkit explore: could not remove %s\n", dir.c_str());
}

// Runs PROG with PMKIT_TRACE=trace; throws Error unless it exits 0.
void record(const std::vector<std::string> &prog, const std::string &trace,
            double timeout) {
  unlink(trace.c_str());
  pid_t pid = fork();
  if (pid < 0)
    throw Error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    setenv("PMKIT_TRACE", trace.c_str(), 1);
    setenv("PMKIT_DOMAIN", "adr", 1);
    unsetenv("PMKIT_CRASH_AT");
    unsetenv("PMKIT_CRASH_SEED");
    std::vector<char *> av;
    for (const std::string &s : prog)
      av.push_back(const_cast<char *>(s.c_str()));
    av.push_back(nullptr);
    execvp(av[0], av.data());
    fprintf(stderr, "pmkit explore: cannot run %s: %s\n", av[0],
            strerror(errno));
    _exit(127);
  }
  bool timedOut;
  int st = waitWithTimeout(pid, timeout, &timedOut);
  std::string name = prog[0];
  if (timedOut)
    throw Error(name + " did not finish within " +
                std::to_string((int)timeout) +
                " s while tracing (--run-timeout); nothing explored");
  if (WIFSIGNALED(st))
    throw Error(name + " crashed while tracing (signal " +
                std::to_string(WTERMSIG(st)) + ", " + strsignal(WTERMSIG(st)) +
                "); nothing explored");
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
    throw Error("could not run " + name);
  if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
    throw Error(name + " exited with status " +
                std::to_string(WEXITSTATUS(st)) +
                " while tracing; nothing explored");
  struct stat sb;
  if (stat(trace.c_str(), &sb) != 0 || sb.st_size == 0)
    throw Error(name + " wrote no trace: build it with `pmkit cc --trace` "
                       "(or pmkit_trace_target in CMake) so that it links "
                       "libpmkit-trace");
}

void dumpTrace(const Trace &T) {
  static const char *kinds[] = {
      "?",       "store",   "ntstore",    "rmw",      "memset",    "flush",
      "fence",   "load",    "mark-begin", "mark-end", "pool-open", "pool-close",
      "acquire", "release", "seqpoint",   "call"};
  for (const Pool &p : T.pools)
    printf("pool %u %s base %#llx size %llu\n", p.id, p.path.c_str(),
           (unsigned long long)p.base, (unsigned long long)p.size);
  for (size_t i = 0; i < T.events.size(); i++) {
    const Event &e = T.events[i];
    const Pool *p = T.poolOf(e.addr);
    std::string where = p ? "pool" + std::to_string(p->id) + "+" +
                                std::to_string(e.addr - p->base)
                          : "-";
    std::string what;
    if (e.kind == PMKIT_EV_MARK_BEGIN || e.kind == PMKIT_EV_MARK_END)
      what = T.markText((uint32_t)e.arg);
    else if (e.kind == PMKIT_EV_FLUSH || e.kind == PMKIT_EV_FENCE)
      what = "kind=" + std::to_string(e.aux);
    else if (e.kind == PMKIT_EV_ACQUIRE || e.kind == PMKIT_EV_RELEASE ||
             e.kind == PMKIT_EV_SEQPOINT) {
      char a[32];
      snprintf(a, sizeof a, "%#llx", (unsigned long long)e.addr);
      if (!p && e.addr)
        where = a;
      what = (e.aux & PMKIT_SYNC_VOLATILE) ? "volatile" : "persistent";
      if (e.kind != PMKIT_EV_SEQPOINT)
        what += " val=" + std::to_string(e.arg);
    } else if (e.writes() || e.kind == PMKIT_EV_LOAD)
      what = "len=" + std::to_string(e.length()) +
             (e.size ? " val=" + std::to_string(e.arg) : "");
    printf("%zu t%u %s %s %s %s\n", i, e.tid, kinds[e.kind], where.c_str(),
           what.c_str(), T.stackText(e.loc).c_str());
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--fork-server"))
    return forkServerMain(argc, argv);
  Args A = parse(argc, argv);
  std::string work;
  try {
    if (!A.image.empty()) {
      if (A.O.checker.lib.empty())
        usage("--image needs --check-lib");
      int r = runCheckLib(A.O.checker.lib, A.image);
      printf("%s: %s\n", A.image.c_str(), r ? "INCONSISTENT" : "consistent");
      return r ? 1 : 0;
    }
    if (!A.dump && A.O.checker.command.empty() == A.O.checker.lib.empty())
      usage("give exactly one of --check and --check-lib");
    if (A.prog.empty() == A.trace.empty())
      usage("give a program after -- or a --trace file (not both)");
    makeModel(A.O.model); // an unknown model fails before any work
    if (!A.O.checker.lib.empty() && access(A.O.checker.lib.c_str(), R_OK))
      throw Error("cannot read the check library " + A.O.checker.lib);
    work = makeWorkDir();
    A.O.checker.workDir = work;
    A.O.checker.self = selfPath();
    std::string trace = A.trace;
    if (!A.prog.empty()) {
      trace = A.keepTrace.empty() ? work + "/trace" : A.keepTrace;
      record(A.prog, trace, A.runTimeout);
    }
    Trace T(trace);
    if (!T.complete)
      throw Error(trace + " is incomplete (no END block): the traced "
                          "program did not exit normally");
    if (A.dump) {
      dumpTrace(T);
      removeTree(work);
      return 0;
    }
    int r = explore(T, A.O);
    removeTree(work);
    return r;
  } catch (const Error &e) {
    fprintf(stderr, "pmkit explore: %s\n", e.what());
    if (!work.empty())
      removeTree(work);
    return 2;
  }
}
