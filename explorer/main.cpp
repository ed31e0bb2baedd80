// SPDX-License-Identifier: Apache-2.0
//
// main.cpp -- the pmkit-explore command (`pmkit explore` runs it): records a
// trace of a program built with `pmkit cc --trace`, or reads one, and
// explores its crash images (engine.cpp). Also replays one saved image with
// an in-process checker (--image) and, internally, runs as the fork server
// of that checker (--fork-server). Exit status: 0 every image consistent,
// 1 an inconsistent image, 2 a usage or environment error.

#include "explorer.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <optional>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
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
    "  --timeout SEC    per image (default 10)\n"
    "  --run-timeout SEC  for PROG while tracing (default 600)\n"
    "  --trace FILE     explore this trace instead of running PROG\n"
    "  --keep-trace F   write the recorded trace to F and keep it\n"
    "  --save-dir DIR   where failing images go (default\n"
    "                   ./pmkit-explore-failures; never replacing one there)\n"
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
  fprintf(stderr,
          "pmkit explore: %s (pmkit explore --help lists the options)\n",
          why.c_str());
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
    static const char *const valued[] = {
        "--model",      "--points",     "--budget",   "--per-point",
        "--stop-after", "--seed",       "--jobs",     "--mark",
        "--check",      "--check-lib",  "--timeout",  "--run-timeout",
        "--trace",      "--keep-trace", "--save-dir", "--max-reports",
        "--json",       "--image"};
    if (std::find(std::begin(valued), std::end(valued), key) ==
        std::end(valued))
      usage("unknown option " + key);
    if (eq != std::string::npos)
      val = a.substr(eq + 1);
    else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
      val = argv[++i];
    else
      usage(
          key + " needs a value" +
          (i + 1 < argc ? std::string(", not the option ") + argv[i + 1] : ""));
    const char *v = val.c_str();
    if (key == "--model")
      A.O.model = val;
    else if (key == "--points")
      A.O.points = val;
    else if (key == "--budget") {
      A.O.budget = number(key, v);
      if (!A.O.budget)
        usage("--budget 0 would check no image: give at least 1");
    } else if (key == "--per-point") {
      A.O.perPoint = number(key, v);
      if (A.O.perPoint == 0)
        usage("--per-point 0 would check no image of any crash point: give at "
              "least 1");
      A.O.perPoint = std::max<uint64_t>(2, A.O.perPoint);
    } else if (key == "--stop-after") {
      A.O.stopAfter = number(key, v);
      if (!A.O.stopAfter)
        usage("--stop-after needs at least 1 failing image");
    } else if (key == "--seed")
      A.O.seed = number(key, v);
    else if (key == "--jobs") {
      uint64_t j = number(key, v);
      if (j == 0 ||
          j > 256) // each checker holds files and an image of every pool
        usage("--jobs takes 1 to 256 checkers at once");
      A.O.jobs = (unsigned)j;
    } else if (key == "--mark")
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

// Throws unless `path` is a regular file (or does not exist: opening it then
// names the problem); a FIFO would block the open that reads it.
void requireRegular(const std::string &path, const char *what) {
  struct stat sb;
  if (stat(path.c_str(), &sb) == 0 && !S_ISREG(sb.st_mode))
    throw Error(std::string(what) + " " + path + " is not a regular file" +
                (S_ISFIFO(sb.st_mode)  ? " (a FIFO)"
                 : S_ISDIR(sb.st_mode) ? " (a directory)"
                                       : ""));
}

std::string selfPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    throw Error("cannot find this executable (/proc/self/exe)");
  return std::string(buf, (size_t)n);
}

// ---- the work directory, and a stop by a signal ---------------------------
//
// The work directory (images, logs, the recorded trace) lives in /dev/shm
// when there is one, where it holds memory until it is removed. A run stopped
// by SIGTERM, SIGINT or SIGHUP (`timeout`, ^C, a closed terminal) removes it
// and kills its children first: the signals are blocked in every thread and
// taken by one thread (sigwait), which cleans up and then dies of the signal.
// SIGKILL cannot be caught, so each run also removes the directories of runs
// that are gone: a directory's name says whose it is,
// pmkit-explore.PID-START-NS.XXXXXX with START the run's start time (field 22
// of /proc/PID/stat, 0 if unknown: a PID used again is not the same run) and
// NS the inode of its PID namespace (a PID of another namespace, seen in a
// shared /dev/shm, says nothing: such a directory is left alone).

struct StopState {
  std::mutex mu; // held by forkChild, reapChild and, for good, by the stop
  std::string work;
  std::vector<std::pair<pid_t, bool>> kids; // pid, has its own group
  sigset_t stopSignals, saved;
  bool armed = false;
};
// Never destroyed: the stop thread may use it while main() returns.
StopState &S = *new StopState;

// Removes `name` (relative to the directory `parent`) and, if it is a
// directory, what it holds, never following a symbolic link; true if it is
// gone.
bool removeAt(int parent, const char *name) {
  if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
    return true;
  if (errno != EISDIR)
    return false;
  int fd =
      openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return false;
  }
  std::vector<std::string> names; // all first: no removal while reading
  while (struct dirent *e = readdir(d))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      names.push_back(e->d_name);
  bool ok = true;
  for (const std::string &n : names)
    ok = removeAt(dirfd(d), n.c_str()) && ok;
  closedir(d);
  return (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT) && ok;
}

bool removeTree(const std::string &dir) {
  if (removeAt(AT_FDCWD, dir.c_str()))
    return true;
  fprintf(stderr, "pmkit explore: could not remove %s\n", dir.c_str());
  return false;
}

// Reads the state (field 3) and start time (field 22, clock ticks since boot)
// of process `pid` from /proc; false if it cannot.
bool procStat(pid_t pid, char *state, uint64_t *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  // The command's name (field 2) may hold anything but ends at the last ')'.
  const char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ' || !p[2])
    return false;
  *state = p[2];
  for (int field = 2; p && field < 22; field++)
    p = strchr(p + 1, ' ');
  if (!p)
    return false;
  *start = strtoull(p + 1, nullptr, 10);
  return true;
}

uint64_t startTime(pid_t pid) {
  char state;
  uint64_t start;
  return procStat(pid, &state, &start) ? start : 0;
}

// The inode of this process's PID namespace, 0 if unknown.
uint64_t pidNamespace() {
  char buf[64];
  ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  const char *p = strchr(buf, '[');
  return p ? strtoull(p + 1, nullptr, 10) : 0;
}

// Whether the run PID, started at START, is gone: its PID is free, or it is
// a zombie (killed, not yet reaped), or it is used by a process started at
// another time. When in doubt, it is not.
bool runIsGone(pid_t pid, uint64_t start) {
  if (pid <= 0)
    return false;
  if (kill(pid, 0) != 0 && errno == ESRCH)
    return true;
  char state;
  uint64_t now;
  if (!procStat(pid, &state, &now))
    return false;
  return state == 'Z' || state == 'X' || (start && now != start);
}

const char *const WorkRoots[] = {"/dev/shm", "/tmp"};

// Removes the work directories that runs killed before they could clean up
// left behind: this user's, of this PID namespace, whose run is gone.
void removeLeftovers() {
  uint64_t ns = pidNamespace();
  if (!ns)
    return; // cannot tell whose a directory is
  for (const char *root : WorkRoots) {
    DIR *d = opendir(root);
    if (!d)
      continue;
    std::vector<std::string> gone;
    while (struct dirent *e = readdir(d)) {
      int pid, end = 0;
      unsigned long long start, dirNs;
      if (sscanf(e->d_name, "pmkit-explore.%d-%llu-%llu.%*6[^/]%n", &pid,
                 &start, &dirNs, &end) != 3 ||
          !end || e->d_name[end] || dirNs != ns)
        continue;
      struct stat sb;
      if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISDIR(sb.st_mode) && sb.st_uid == geteuid() &&
          runIsGone((pid_t)pid, start))
        gone.push_back(e->d_name);
    }
    for (const std::string &n : gone)
      removeAt(dirfd(d), n.c_str());
    closedir(d);
  }
}

std::string makeWorkDir() {
  removeLeftovers();
  struct stat sb;
  const char *root = stat(WorkRoots[0], &sb) == 0 && S_ISDIR(sb.st_mode)
                         ? WorkRoots[0]
                         : WorkRoots[1];
  std::string t = std::string(root) + "/pmkit-explore." +
                  std::to_string(getpid()) + "-" +
                  std::to_string(startTime(getpid())) + "-" +
                  std::to_string(pidNamespace()) + ".XXXXXX";
  std::lock_guard<std::mutex> l(S.mu);
  if (!mkdtemp(t.data()))
    throw Error("cannot create a work directory: " +
                std::string(strerror(errno)));
  S.work = t;
  return t;
}

// The stop thread: waits for a stop signal, then kills the children, removes
// the work directory and dies of the signal. It keeps S.mu: no child starts
// and main() does not return meanwhile.
void stopThread() {
  int sig = 0;
  while (sigwait(&S.stopSignals, &sig) != 0)
    ;
  S.mu.lock();
  // What the other threads say now (a checker killed below, say) is noise.
  int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (nul >= 0)
    dup2(nul, 2);
  for (const auto &[pid, group] : S.kids) {
    if (group)
      kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
  // A thread may still be writing an image into the directory: try again.
  for (int i = 0;
       i < 3 && !S.work.empty() && !removeAt(AT_FDCWD, S.work.c_str()); i++)
    usleep(20000);
  signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
  _exit(128 + sig);
}

// Takes SIGTERM, SIGINT and SIGHUP away from every thread to come and starts
// the stop thread. Called before any thread or child starts. A signal this
// run was started ignoring (nohup, a background job) stays ignored.
void armStop() {
  sigemptyset(&S.stopSignals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction sa;
    if (sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler != SIG_IGN)
      sigaddset(&S.stopSignals, sig);
  }
  pthread_sigmask(SIG_BLOCK, &S.stopSignals, &S.saved);
  S.armed = true;
  std::thread(stopThread).detach();
}

// Returns `status` from main(), unless a stop has begun (then this waits to
// be ended by it).
int leave(int status) {
  std::lock_guard<std::mutex> l(S.mu);
  return status;
}

// Runs PROG with PMKIT_TRACE=trace; throws Error unless it exits 0.
void record(const std::vector<std::string> &prog, const std::string &trace,
            double timeout) {
  unlink(trace.c_str());
  pid_t pid = forkChild(true);
  if (pid < 0)
    throw Error(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
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

pid_t pmx::forkChild(bool ownGroup) {
  S.mu.lock();
  pid_t pid = fork();
  if (pid == 0) { // S.mu stays locked here: the child only execs or exits
    if (S.armed)
      pthread_sigmask(SIG_SETMASK, &S.saved, nullptr);
    if (ownGroup)
      setpgid(0, 0);
    return 0;
  }
  if (pid > 0) {
    if (ownGroup)
      setpgid(pid, pid); // as the child does: a stop kills the group at once
    S.kids.emplace_back(pid, ownGroup);
  }
  S.mu.unlock();
  return pid;
}

int pmx::reapChild(pid_t pid) {
  // Reaped and forgotten together, under S.mu: a stop never kills a PID that
  // was freed and used again.
  if (pid <= 0)
    return 0;
  siginfo_t si;
  while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) != 0 &&
         errno == EINTR)
    ;
  std::lock_guard<std::mutex> l(S.mu);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  for (size_t i = 0; i < S.kids.size(); i++)
    if (S.kids[i].first == pid) {
      S.kids.erase(S.kids.begin() + (long)i);
      break;
    }
  return st;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--fork-server"))
    return forkServerMain(argc, argv);
  Args A = parse(argc, argv);
  std::string work;
  try {
    if (!A.image.empty()) {
      if (A.O.checker.lib.empty())
        usage("--image needs --check-lib");
      requireRegular(A.O.checker.lib, "the check library");
      requireRegular(A.image, "the image");
      int r = runCheckLib(A.O.checker.lib, A.image);
      printf("%s: %s\n", A.image.c_str(), r ? "INCONSISTENT" : "consistent");
      return r ? 1 : 0;
    }
    if (!A.dump && A.O.checker.command.empty() == A.O.checker.lib.empty())
      usage("give exactly one of --check and --check-lib");
    if (A.prog.empty() == A.trace.empty())
      usage("give a program after -- or a --trace file (not both)");
    // The image reaches the command only through {pool}: without it every check
    // would run on something else, and pass or fail whatever the images hold.
    if (!A.O.checker.command.empty() &&
        A.O.checker.command.find("{pool") == std::string::npos)
      usage("--check '" + A.O.checker.command +
            "' has no {pool}: it would never see a crash image; write {pool} "
            "where the "
            "image's path goes ({pool:N} for pool N)");
    makeModel(A.O.model); // an unknown model fails before any work
    if (!A.O.checker.lib.empty()) {
      if (access(A.O.checker.lib.c_str(), R_OK))
        throw Error("cannot read the check library " + A.O.checker.lib);
      requireRegular(A.O.checker.lib, "the check library");
    }
    armStop();
    work = makeWorkDir();
    A.O.checker.workDir = work;
    A.O.checker.self = selfPath();
    std::string trace = A.trace;
    if (!A.prog.empty()) {
      trace = A.keepTrace.empty() ? work + "/trace" : A.keepTrace;
      record(A.prog, trace, A.runTimeout);
    }
    // Messages name a trace the user gave, never one in the work directory.
    std::string shown =
        trace == work + "/trace" ? "the trace " + A.prog[0] + " wrote" : trace;
    std::optional<Trace> T;
    try {
      T.emplace(trace);
    } catch (const Error &e) {
      std::string m = e.what();
      for (size_t at; shown != trace && (at = m.find(trace)) != m.npos;)
        m.replace(at, trace.size(), shown);
      throw Error(m);
    }
    if (!T->complete)
      throw Error(shown + " is incomplete (no END block): the traced "
                          "program did not exit normally");
    if (A.dump) {
      dumpTrace(*T);
      removeTree(work);
      return leave(0);
    }
    int r = explore(*T, A.O);
    removeTree(work);
    return leave(r);
  } catch (const Error &e) {
    fprintf(stderr, "pmkit explore: %s\n", e.what());
    if (!work.empty())
      removeTree(work);
    return leave(2);
  }
}
