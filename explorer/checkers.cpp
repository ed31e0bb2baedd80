// SPDX-License-Identifier: Apache-2.0
//
// checkers.cpp -- the two ways of checking a crash image. Both keep, per job
// slot, a memfd per pool holding the fully visible image at the slot's
// current trace position, moved forward by applying the trace's writes (and
// rebuilt from the initial image when a job goes back). ExecChecker copies
// the image to a file and runs the user's command on it (`--check 'CMD
// {pool}'`) with a timeout. ForkServerChecker talks to a fork server (this
// executable, exec'd with --fork-server) that has loaded the user's check
// library once and forks a child per image; the child maps the memfd
// privately at the pool's base, applies the image's deviations and calls
// pmkit_check(base). Entry points: makeChecker, forkServerMain.

#include "explorer.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pmx {

namespace {

std::string waitText(int st) {
  if (WIFEXITED(st))
    return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st))
    return std::string("killed by signal ") + std::to_string(WTERMSIG(st)) +
           " (" + strsignal(WTERMSIG(st)) + ")";
  return "status " + std::to_string(st);
}

void writeAll(int fd, const void *p, size_t n, off_t off = -1) {
  const char *c = (const char *)p;
  while (n) {
    ssize_t w = off < 0 ? write(fd, c, n) : pwrite(fd, c, n, off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      throw Error(std::string("write failed: ") + strerror(errno));
    c += w;
    n -= (size_t)w;
    if (off >= 0)
      off += w;
  }
}

// The first lines of a log file, for reports.
std::string head(const std::string &path, size_t maxBytes = 600) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "";
  std::string s(maxBytes, '\0');
  ssize_t r = read(fd, s.data(), maxBytes);
  close(fd);
  s.resize(r > 0 ? (size_t)r : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

// The pool images of one slot, following the trace.
class Images {
public:
  Images(const Trace &T) : T(T) {
    for (const Pool &p : T.pools) {
      bool dup = false;
      for (const Mem &m : mems)
        dup |= m.pool->base == p.base;
      if (dup)
        continue; // a reopened pool: same memory
      Mem m;
      m.pool = &p;
      m.fd = (int)syscall(SYS_memfd_create, "pmkit-image", 1u /*CLOEXEC*/);
      if (m.fd < 0 || ftruncate(m.fd, (off_t)p.size) != 0)
        throw Error(std::string("memfd_create: ") + strerror(errno));
      void *a =
          mmap(nullptr, p.size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
      if (a == MAP_FAILED)
        throw Error(std::string("mmap: ") + strerror(errno));
      m.map = (uint8_t *)a;
      mems.push_back(m);
    }
    reset();
  }
  ~Images() {
    for (Mem &m : mems) {
      munmap(m.map, m.pool->size);
      close(m.fd);
    }
  }

  // Brings the images to "crash before events[pos]".
  void sync(size_t pos) {
    if (pos < at)
      reset();
    for (; at < pos && at < T.events.size(); at++) {
      const Event &e = T.events[at];
      if (!e.writes())
        continue;
      uint64_t len = e.length();
      for (Mem &m : mems) {
        uint64_t b = m.pool->base;
        if (e.addr < b || e.addr - b >= m.pool->size)
          continue;
        uint64_t off = e.addr - b, n = std::min(len, m.pool->size - off);
        if (e.kind == PMKIT_EV_MEMSET)
          memset(m.map + off, (int)e.aux, n);
        else if (e.data)
          memcpy(m.map + off, e.data, n);
        else
          memcpy(m.map + off, &e.arg, n);
      }
    }
  }

  struct Mem {
    const Pool *pool = nullptr;
    int fd = -1;
    uint8_t *map = nullptr;
  };
  std::vector<Mem> mems;

private:
  const Trace &T;
  size_t at = 0;
  // Back to the initial images: drop every page, then copy in the data.
  void reset() {
    for (Mem &m : mems) {
      if (fallocate(m.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                    (off_t)m.pool->size) != 0)
        memset(m.map, 0, m.pool->size);
      for (uint64_t pg : m.pool->pages)
        memcpy(m.map + pg * PMKIT_TRACE_PAGE,
               m.pool->image.data() + pg * PMKIT_TRACE_PAGE, PMKIT_TRACE_PAGE);
    }
    at = 0;
  }
};

// Applies deviations that fall in [base, base+size) to a buffer or file.
void applyDevs(const std::vector<Dev> &devs, uint64_t base, uint64_t size,
               uint8_t *mem, int fd) {
  for (const Dev &d : devs) {
    if (d.addr < base || d.addr - base >= size)
      continue;
    uint64_t off = d.addr - base;
    size_t n = std::min<uint64_t>(d.bytes.size(), size - off);
    if (mem)
      memcpy(mem + off, d.bytes.data(), n);
    else
      writeAll(fd, d.bytes.data(), n, (off_t)off);
  }
}

void writeImageFile(const Images::Mem &m, const std::vector<Dev> &devs,
                    const std::string &path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("cannot write " + path + ": " + strerror(errno));
  if (ftruncate(fd, (off_t)m.pool->size) != 0)
    throw Error("cannot size " + path + ": " + strerror(errno));
  // Only the memfd's data extents: the file stays sparse like the pool.
  for (off_t off = 0; off < (off_t)m.pool->size;) {
    off_t d = lseek(m.fd, off, SEEK_DATA);
    if (d < 0 && errno == ENXIO)
      break;     /* no more data */
    if (d < 0) { /* no extent information: write the rest */
      writeAll(fd, m.map + off, (size_t)(m.pool->size - off), off);
      break;
    }
    off_t e = lseek(m.fd, d, SEEK_HOLE);
    if (e < 0 || e > (off_t)m.pool->size)
      e = (off_t)m.pool->size;
    writeAll(fd, m.map + d, (size_t)(e - d), d);
    off = e;
  }
  applyDevs(devs, m.pool->base, m.pool->size, nullptr, fd);
  close(fd);
}

std::string shellQuote(const std::string &s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class ExecChecker : public Checker {
public:
  ExecChecker(const Trace &T, const CheckerOptions &O, unsigned slot)
      : img(T), O(O) {
    std::string dir = O.workDir + "/slot" + std::to_string(slot);
    mkdir(dir.c_str(), 0755);
    for (size_t i = 0; i < img.mems.size(); i++)
      paths.push_back(dir + "/pool" + std::to_string(i));
    log = dir + "/output";
  }

  std::string commandFor(const std::vector<std::string> &ps) const {
    std::string c = O.command;
    for (size_t i = 0; i < ps.size(); i++) {
      std::string key = "{pool:" + std::to_string(i) + "}";
      for (size_t at; (at = c.find(key)) != std::string::npos;)
        c.replace(at, key.size(), shellQuote(ps[i]));
    }
    for (size_t at; (at = c.find("{pool}")) != std::string::npos;)
      c.replace(at, 6, shellQuote(ps.empty() ? "" : ps[0]));
    return c;
  }

  Result check(const Job &job) override {
    img.sync(job.pos);
    for (size_t i = 0; i < img.mems.size(); i++)
      writeImageFile(img.mems[i], job.devs, paths[i]);
    Result r;
    r.id = job.id;
    std::string cmd = commandFor(paths);
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    std::string readTrace = log + ".trace";
    if (O.traceReads)
      unlink(readTrace.c_str());
    pid_t pid = forkChild(true);
    if (pid < 0)
      throw Error(std::string("fork: ") + strerror(errno));
    if (pid == 0) {
      if (O.traceReads)
        setenv("PMKIT_TRACE", readTrace.c_str(), 1);
      else
        unsetenv("PMKIT_TRACE");
      if (out >= 0) {
        dup2(out, 1);
        dup2(out, 2);
      }
      int nul = open("/dev/null", O_RDONLY);
      if (nul >= 0)
        dup2(nul, 0);
      execl("/bin/sh", "sh", "-c", cmd.c_str(), (char *)nullptr);
      _exit(127);
    }
    if (out >= 0)
      close(out);
    int st = waitWithTimeout(pid, O.timeout, &r.timedOut);
    r.output = head(log);
    if (r.timedOut) {
      r.status = "timed out after " + std::to_string((int)O.timeout) + " s";
      return r;
    }
    r.status = waitText(st);
    r.ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    r.cannotRun =
        WIFEXITED(st) && (WEXITSTATUS(st) == 127 || WEXITSTATUS(st) == 126);
    if (O.traceReads && access(readTrace.c_str(), R_OK) == 0) {
      try {
        Trace ct(readTrace);
        for (const Event &e : ct.events)
          if (e.kind == PMKIT_EV_LOAD) {
            for (uint64_t a = e.addr & ~7ull; a < e.addr + e.length(); a += 8)
              r.reads.push_back(a);
            r.readsKnown = true;
          }
      } catch (const Error &) {
        /* a checker that crashed leaves a partial trace: reads unknown */
      }
    }
    return r;
  }

  void save(const Job &job, const std::string &path) override {
    img.sync(job.pos);
    for (size_t i = 0; i < img.mems.size(); i++)
      writeImageFile(img.mems[i], job.devs,
                     i ? path + "." + std::to_string(i) : path);
  }

  std::string reproduce(const std::string &imagePath) const override {
    std::vector<std::string> ps;
    for (size_t i = 0; i < img.mems.size(); i++)
      ps.push_back(i ? imagePath + "." + std::to_string(i) : imagePath);
    return commandFor(ps);
  }

private:
  Images img;
  const CheckerOptions &O;
  std::vector<std::string> paths;
  std::string log;
};

// Request: {u64 id, u32 ndev, u32 0} then ndev x {u64 addr, u64 len, bytes
// padded to 8}. Reply: {u64 id, i32 wait status, i32 timed out}.
class ForkServerChecker : public Checker {
public:
  ForkServerChecker(const Trace &T, const CheckerOptions &O, unsigned slot)
      : img(T), O(O) {
    if (img.mems.size() != 1)
      throw Error("the in-process checker (--check-lib) takes traces of one "
                  "pool; this one has " +
                  std::to_string(img.mems.size()) + ": use --check");
    log = O.workDir + "/server" + std::to_string(slot) + ".out";
    int req[2], rep[2];
    if (pipe2(req, O_CLOEXEC) || pipe2(rep, O_CLOEXEC))
      throw Error(std::string("pipe: ") + strerror(errno));
    const Images::Mem &m = img.mems[0];
    pid = forkChild(false);
    if (pid < 0)
      throw Error(std::string("fork: ") + strerror(errno));
    if (pid == 0) {
      // Move the three out of the way first: any of them may be 3..5.
      int a = fcntl(req[0], F_DUPFD, 10), b = fcntl(rep[1], F_DUPFD, 10),
          c = fcntl(m.fd, F_DUPFD, 10);
      dup2(a, 3);
      dup2(b, 4);
      dup2(c, 5);
      char base[32], size[32], tmo[32];
      snprintf(base, sizeof base, "%#llx", (unsigned long long)m.pool->base);
      snprintf(size, sizeof size, "%llu", (unsigned long long)m.pool->size);
      snprintf(tmo, sizeof tmo, "%d", (int)(O.timeout + 0.999));
      execl(O.self.c_str(), O.self.c_str(), "--fork-server", O.lib.c_str(),
            base, size, tmo, log.c_str(), (char *)nullptr);
      fprintf(stderr, "pmkit explore: cannot run %s: %s\n", O.self.c_str(),
              strerror(errno));
      _exit(2);
    }
    close(req[0]);
    close(rep[1]);
    toServer = req[1];
    fromServer = rep[0];
    signal(SIGPIPE, SIG_IGN);
  }
  ~ForkServerChecker() override {
    close(toServer);
    close(fromServer);
    if (pid > 0)
      reapChild(pid);
  }

  Result check(const Job &job) override {
    img.sync(job.pos);
    std::vector<uint8_t> msg(16);
    uint64_t hdr[2] = {job.id, job.devs.size()};
    memcpy(msg.data(), hdr, 16);
    for (const Dev &d : job.devs) {
      uint64_t h[2] = {d.addr, d.bytes.size()};
      msg.insert(msg.end(), (uint8_t *)h, (uint8_t *)h + 16);
      msg.insert(msg.end(), d.bytes.begin(), d.bytes.end());
      msg.resize((msg.size() + 7) & ~(size_t)7);
    }
    Result r;
    r.id = job.id;
    int64_t rep[2];
    try {
      writeAll(toServer, msg.data(), msg.size());
    } catch (const Error &) {
    }
    if (!readAll(fromServer, rep, sizeof rep)) {
      int st = reapChild(pid);
      pid = -1;
      std::string why = head(log);
      throw Error("the in-process checker " + O.lib + " stopped (" +
                  waitText(st) + ")" + (why.empty() ? "" : ": " + why));
    }
    int st = (int)rep[0];
    r.output = head(log);
    if (rep[1]) {
      r.timedOut = true;
      r.status = "timed out after " + std::to_string((int)O.timeout) + " s";
      return r;
    }
    r.status = waitText(st);
    r.ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    return r;
  }

  void save(const Job &job, const std::string &path) override {
    img.sync(job.pos);
    writeImageFile(img.mems[0], job.devs, path);
  }

  std::string reproduce(const std::string &imagePath) const override {
    return "pmkit explore --check-lib " + shellQuote(O.lib) + " --image " +
           shellQuote(imagePath);
  }

private:
  Images img;
  const CheckerOptions &O;
  std::string log;
  pid_t pid = -1;
  int toServer = -1, fromServer = -1;
};

using CheckFn = int (*)(void *);

CheckFn loadCheck(const std::string &lib) {
  void *h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    throw Error("cannot load the check library: " + std::string(dlerror()));
  void *f = dlsym(h, "pmkit_check");
  if (!f)
    throw Error(lib + " does not export pmkit_check(void *pool_base)");
  return (CheckFn)f;
}

} // namespace

bool readAll(int fd, void *p, size_t n) {
  char *c = (char *)p;
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    c += r;
    n -= (size_t)r;
  }
  return true;
}

int waitWithTimeout(pid_t pid, double timeout, bool *timedOut) {
  *timedOut = false;
  int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pfd >= 0) {
    struct pollfd p = {pfd, POLLIN, 0};
    int n;
    do
      n = poll(&p, 1, (int)(timeout * 1000));
    while (n < 0 && errno == EINTR);
    close(pfd);
    if (n == 0) {
      kill(-pid, SIGKILL); /* its process group (the child called setpgid) */
      kill(pid, SIGKILL);
      *timedOut = true;
    }
  }
  return reapChild(pid);
}

std::unique_ptr<Checker> makeChecker(const Trace &T, const CheckerOptions &O,
                                     unsigned slot) {
  if (!O.lib.empty())
    return std::make_unique<ForkServerChecker>(T, O, slot);
  return std::make_unique<ExecChecker>(T, O, slot);
}

// argv: --fork-server LIB BASE SIZE TIMEOUT LOG; fds 3 (requests),
// 4 (replies), 5 (the image memfd).
int forkServerMain(int argc, char **argv) {
  if (argc != 7)
    return 2;
  const char *logPath = argv[6];
  int logfd = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (logfd >= 0)
    dup2(logfd, 2);
  CheckFn check;
  try {
    check = loadCheck(argv[2]);
  } catch (const Error &e) {
    fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  uint64_t base = strtoull(argv[3], nullptr, 0);
  uint64_t size = strtoull(argv[4], nullptr, 0);
  int timeout = atoi(argv[5]);
  for (;;) {
    uint64_t hdr[2];
    if (!readAll(3, hdr, sizeof hdr))
      return 0;
    std::vector<Dev> devs(hdr[1]);
    for (Dev &d : devs) {
      uint64_t h[2];
      if (!readAll(3, h, sizeof h) || h[1] > (1u << 20))
        return 2;
      d.addr = h[0];
      d.bytes.resize((h[1] + 7) & ~7ull);
      if (!readAll(3, d.bytes.data(), d.bytes.size()))
        return 2;
      d.bytes.resize(h[1]);
    }
    pid_t pid = fork();
    if (pid == 0) {
      int out = open(logPath, O_WRONLY | O_TRUNC | O_CLOEXEC);
      if (out >= 0) {
        dup2(out, 1);
        dup2(out, 2);
      }
      void *m = mmap((void *)base, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_FIXED_NOREPLACE, 5, 0);
      if (m != (void *)base) {
        fprintf(stderr, "cannot map the image at %#llx: %s\n",
                (unsigned long long)base, strerror(errno));
        _exit(3);
      }
      applyDevs(devs, base, size, (uint8_t *)m, -1);
      alarm((unsigned)timeout);
      int r = check(m);
      fflush(stdout);
      _exit(r == 0 ? 0 : 1);
    }
    int st = 0, timedOut = 0;
    if (pid < 0) {
      st = 2 << 8;
    } else {
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
      timedOut = WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM;
    }
    int64_t rep[2] = {st, timedOut};
    if (write(4, rep, sizeof rep) != sizeof rep)
      return 0;
  }
}

int runCheckLib(const std::string &lib, const std::string &image) {
  CheckFn check = loadCheck(lib);
  int fd = open(image.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot open " + image + ": " + strerror(errno));
  uint8_t hdr[4096];
  if (pread(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr)
    throw Error(image + " is too short to be a pool image");
  uint64_t base = 0, size = 0;
  // Layout of struct pmk_hdr (runtime/core/internal.h): magic[8],
  // layout_version u32, hdr_size u32, size u64, base u64.
  memcpy(&size, hdr + 16, 8);
  memcpy(&base, hdr + 24, 8);
  if (!base || !size)
    throw Error(image + " is not a pmkit pool image");
  void *m = mmap((void *)base, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
  close(fd);
  if (m != (void *)base)
    throw Error("cannot map " + image + " at its base address");
  return check(m) == 0 ? 0 : 1;
}

} // namespace pmx
