/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_alloc_crash.c -- the allocator's metadata survives a crash at any
 * instruction and never hands a published block out twice. Two campaigns
 * on one pool that carries its state from crash to crash:
 *   1. random kills: a child runs the heapwalk workload and is SIGKILLed
 *      after a random delay; the parent reopens the pool and runs the
 *      checker. PMKIT_CRASH_TRIALS trials (default 2000, 300 with
 *      PMKIT_TEST_QUICK) within PMKIT_CRASH_SECONDS (default 120).
 *   2. every crash point: a child runs a fixed operation stream with
 *      PMKIT_CRASH_AT=N for each N up to the stream's point count (sampled
 *      evenly when there are more than 400), and must end with status
 *      PMKIT_CRASH_EXIT; then the checker runs.
 * Every 100 checks, pmkit_pool_gc must bring the live blocks down to the
 * published ones plus the root: leaks from crashes are reclaimable.
 * Usage: test_alloc_crash [child POOL SEED OPS]
 */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "heapwalk.h"

static int child(const char *path, uint64_t seed, uint64_t ops) {
  const char *rfd = getenv("HW_READY_FD");
  int ready = rfd ? atoi(rfd) : -1;
  pmkit_pool *p;
  struct hw_root *rt;
  if (pmkit_pool_open(path, NULL, &p) ||
      pmkit_root(p, sizeof *rt, (void **)&rt)) {
    fprintf(stderr, "child: %s\n", pmkit_errormsg());
    return 3;
  }
  uint64_t rng = seed | 1;
  for (uint64_t k = 0; ops == 0 || k < ops; k++) {
    int r = hw_step(p, rt, &rng, 0, HW_SLOTS, seed * 1000003 + k);
    rt->ops++;
    if (k == 0 && ready >= 0) { /* tell the parent the run is under way */
      if (write(ready, "r", 1) != 1)
        return 3;
      close(ready);
    }
    if (r) {
      fprintf(stderr, "child: op %llu: %s\n", (unsigned long long)k,
              pmkit_errormsg());
      return 3;
    }
  }
  pmkit_pool_close(p);
  return 0;
}

static char self[4096];

static pid_t spawn(const char *path, uint64_t seed, uint64_t ops,
                   uint64_t crash_at, const char *report, int ready_fd) {
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    /* A child without an operation count runs until killed: it dies with
     * this process (one outlived a stopped test run by twenty minutes). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
      _exit(127);
    char s[32], o[32], c[32], r[16];
    if (ready_fd >= 0) {
      snprintf(r, sizeof r, "%d", ready_fd);
      setenv("HW_READY_FD", r, 1);
    }
    snprintf(s, sizeof s, "%llu", (unsigned long long)seed);
    snprintf(o, sizeof o, "%llu", (unsigned long long)ops);
    if (crash_at) {
      snprintf(c, sizeof c, "%llu", (unsigned long long)crash_at);
      setenv("PMKIT_CRASH_AT", c, 1);
    }
    if (report)
      setenv("PMKIT_CRASH_REPORT", report, 1);
    execl(self, self, "child", path, s, o, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static unsigned checks;
static uint64_t last_ops;

/* Check the pool; 0 if consistent. Failing fails the case unless
 * `may_fail`. */
static int verify(const char *path, const char *what, int may_fail) {
  pmkit_pool *p;
  struct hw_root *rt;
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *rt, (void **)&rt));
  last_ops = rt->ops;
  int n = hw_check(p, rt);
  if (n < 0) {
    fprintf(stderr, "after %s: heap inconsistent\n", what);
    CHECK(may_fail);
    pmkit_pool_close(p);
    return 1;
  }
  if (++checks % 100 == 0) {
    pmkit_gc_stats gs;
    CHECK_OK(pmkit_pool_gc(p, 0, &gs));
    pmkit_pool_info info;
    CHECK_OK(pmkit_pool_stat(p, &info));
    if (info.blocks_used != (uint64_t)n + 1)
      fprintf(stderr, "after gc: %llu blocks live, %d published + root\n",
              (unsigned long long)info.blocks_used, n);
    CHECK(info.blocks_used == (uint64_t)n + 1);
    CHECK(hw_check(p, rt) == n);
  }
  CHECK_OK(pmkit_pool_close(p));
  return 0;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t selflen; /* of self, the program's path */
static const char *path;

/* 1. Random kills: a child runs the workload until SIGKILLed after a random
 * delay; the pool must check out after each. */
static void random_kills(void) {
  int quick = getenv("PMKIT_TEST_QUICK") != NULL;
  const char *t = getenv("PMKIT_CRASH_TRIALS");
  unsigned trials = t ? (unsigned)atoi(t) : quick ? 300 : 2000;
  const char *s = getenv("PMKIT_CRASH_SECONDS");
  double budget = s ? atof(s) : 120;

  path = test_pool_path("alloc-crash");
  pmkit_pool *p;
  CHECK_OK(pmkit_pool_create(path, 16 << 20, NULL, &p));
  CHECK_OK(pmkit_pool_close(p));

  uint64_t rng = 0x9e3779b97f4a7c15ull;
  double t0 = now();
  unsigned done = 0, killed = 0, progressed = 0;
  for (; done < trials && now() - t0 < budget; done++) {
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = spawn(path, done + 1, 0, 0, NULL, fd[1]);
    close(fd[1]);
    /* Wait until the child has opened the pool and finished an operation
     * (however slow start-up is, e.g. under ASan), then let it run on for
     * a random while before the kill. */
    char c;
    CHECK(read(fd[0], &c, 1) == 1);
    close(fd[0]);
    struct timespec d = {0, (long)(test_rand(&rng) % 4000000)};
    nanosleep(&d, NULL);
    kill(pid, SIGKILL);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFEXITED(st))
      fprintf(stderr, "child exited with %d before the kill\n",
              WEXITSTATUS(st));
    CHECK(!WIFEXITED(st));
    killed++;
    uint64_t before = last_ops;
    verify(path, "a random kill", 0);
    if (last_ops > before)
      progressed++;
  }
  printf("random kills: %u trials, %u killed mid-run, %u after new "
         "operations, all consistent (%.1f s)\n",
         done, killed, progressed, now() - t0);
  CHECK(progressed == done);
}

/* 2. Every crash point of a fixed stream (on the pool the kills left). */
static void every_crash_point(void) {
  int quick = getenv("PMKIT_TEST_QUICK") != NULL;
  const char *report = test_pool_path("alloc-crash-report");
  const uint64_t ops = quick ? 60 : 150;
  int st;
  pid_t pid = spawn(path, 7, ops, 0, report, -1);
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  FILE *f = fopen(report, "r");
  CHECK(f);
  unsigned long long points = 0;
  CHECK(fscanf(f, "%llu", &points) == 1);
  fclose(f);
  unlink(report);
  CHECK(points > ops);
  verify(path, "a full run", 0);
  uint64_t max_runs = quick ? 100 : 400;
  uint64_t stride = points > max_runs ? points / max_runs : 1;
  unsigned runs = 0;
  for (uint64_t at = 1; at <= points; at += stride, runs++) {
    pid = spawn(path, 7, ops, at, NULL, -1);
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != PMKIT_CRASH_EXIT) {
      /* Later points may not be reached: the pool state differs from the
       * counting run. A normal exit is fine then; anything else is not. */
      CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    char what[64];
    snprintf(what, sizeof what, "crash point %llu", (unsigned long long)at);
    verify(path, what, 0);
  }
  printf("crash points: %llu in the stream, %u crashed at (stride %llu), all "
         "consistent\n",
         points, runs, (unsigned long long)stride);
  unlink(path);
}

/* 3. The must-fail case: a workload that frees before unpublishing. */
static void must_fail_workload(void) {
  snprintf(self + selflen, sizeof self - selflen, "-buggy");
  const char *buggy = test_pool_path("alloc-crash-buggy");
  pmkit_pool *p;
  int st;
  CHECK_OK(pmkit_pool_create(buggy, 16 << 20, NULL, &p));
  CHECK_OK(pmkit_pool_close(p));
  unsigned caught = 0, tried = 0;
  for (uint64_t at = 50; at < 2000 && !caught; at += 7, tried++) {
    pid_t pid = spawn(buggy, 11, 300, at, NULL, -1);
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    caught += verify(buggy, "a buggy run", 1);
  }
  self[selflen] = '\0';
  printf("must-fail workload: caught after %u crash points\n", tried);
  CHECK(caught);
  unlink(buggy);
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "child"))
    return child(argv[2], strtoull(argv[3], NULL, 0),
                 strtoull(argv[4], NULL, 0));
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(n > 0);
  self[n] = '\0';
  selflen = (size_t)n;
  TEST_CASE(random_kills);
  TEST_CASE(every_crash_point);
  TEST_CASE(must_fail_workload);
  printf("alloc_crash: %u checks\n", checks);
  return test_summary();
}
