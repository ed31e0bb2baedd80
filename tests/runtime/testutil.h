/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testutil.h -- the few helpers the runtime tests share: CHECK macros that
 * print the failing expression with pmkit_errormsg(), a tiny runner of named
 * cases, a scratch directory for pool files (PMKIT_TEST_DIR, else
 * /dev/shm), and children: this program run again in a child mode
 * (test_run_self), a call that stops the program run in a child with its
 * stderr captured (test_run_stopping).
 *
 * Cases. main runs each concern as a named case and returns the summary:
 *
 *   static void bad_frees(void) { CHECK_RC(pmkit_free(p, &p), ...); ... }
 *   int main(void) {
 *     TEST_CASE(bad_frees);        // test_run("bad_frees", bad_frees)
 *     ...
 *     return test_summary();
 *   }
 *
 * A case is a `static void fn(void)` run under setjmp. A failed CHECK in it
 * prints its line as always and longjmps out: the case counts as failed and
 * main goes on with the next one. Each case prints one line when it ends,
 * "ok NAME" or "FAIL NAME"; test_summary() prints "N cases: P passed, F
 * failed" (with the failed cases' names in parentheses when F > 0) and
 * returns the exit status, 0 only if none failed. Outside a case (main's
 * own set-up, a child mode) and in any process or thread other than the one
 * running the case (a fork, a worker thread), a failed CHECK exits 1 as
 * before. A case that fails leaves what it had set up (an open pool, a held
 * lock) as it was: cases that share state keep it at file scope, and each
 * case prepares what it needs. Cases do not nest.
 */
#ifndef PMKIT_TESTUTIL_H
#define PMKIT_TESTUTIL_H

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmkit/pmkit.h"

/* The case in flight (test_run) and the tally (test_summary). */
static struct {
  jmp_buf jump;
  int active; /* inside a case */
  pid_t pid;  /* the process and thread running it */
  pthread_t thread;
  unsigned run, failed;
  char names[1024]; /* the failed cases, comma separated */
} test_cases_ __attribute__((unused));

/* A CHECK failed: end the case, or the process outside one. */
static inline void test_fail_(void) {
  if (test_cases_.active && test_cases_.pid == getpid() &&
      pthread_equal(test_cases_.thread, pthread_self()))
    longjmp(test_cases_.jump, 1);
  exit(1);
}

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s (pmkit: %s)\n", __FILE__,       \
              __LINE__, #cond, pmkit_errormsg());                              \
      test_fail_();                                                            \
    }                                                                          \
  } while (0)

#define CHECK_RC(expr, want)                                                   \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_ != (want)) {                                                       \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (pmkit: %s)\n",      \
              __FILE__, __LINE__, #expr, pmkit_strerror(rc_),                  \
              pmkit_strerror(want), pmkit_errormsg());                         \
      test_fail_();                                                            \
    }                                                                          \
  } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, PMKIT_OK)

/* Run fn as the case `name`; 1 if it passed. */
static inline int test_run(const char *name, void (*fn)(void)) {
  fflush(NULL); /* nothing buffered twice by a fork in the case */
  test_cases_.run++;
  test_cases_.pid = getpid();
  test_cases_.thread = pthread_self();
  if (setjmp(test_cases_.jump) == 0) {
    test_cases_.active = 1;
    fn();
    test_cases_.active = 0;
    printf("ok %s\n", name);
    fflush(stdout);
    return 1;
  }
  test_cases_.active = 0;
  test_cases_.failed++;
  size_t used = strlen(test_cases_.names), room = sizeof test_cases_.names;
  if (used + strlen(name) + 8 < room)
    snprintf(test_cases_.names + used, room - used, "%s%s", used ? ", " : "",
             name);
  else if (used + 5 < room && !strstr(test_cases_.names, "..."))
    snprintf(test_cases_.names + used, room - used, ", ...");
  printf("FAIL %s\n", name);
  fflush(stdout);
  return 0;
}
#define TEST_CASE(fn) test_run(#fn, fn)

/* Print the tally; the exit status: 0 only if no case failed. */
static inline int test_summary(void) {
  printf("%u cases: %u passed, %u failed", test_cases_.run,
         test_cases_.run - test_cases_.failed, test_cases_.failed);
  if (test_cases_.failed)
    printf(" (%s)", test_cases_.names);
  printf("\n");
  fflush(stdout);
  return test_cases_.failed ? 1 : 0;
}

/* A fresh pool path "<dir>/<name>.<pid>.pool"; any old file is removed. */
static inline const char *test_pool_path(const char *name) {
  static char buf[4][1024];
  static int k;
  const char *dir = getenv("PMKIT_TEST_DIR");
  if (!dir || !*dir)
    dir = "/dev/shm";
  mkdir(dir, 0755);
  char *b = buf[k++ & 3];
  snprintf(b, sizeof buf[0], "%s/%s.%d.pool", dir, name, (int)getpid());
  unlink(b);
  return b;
}

/* This program's path (/proc/self/exe), to run it again in a child mode. */
static inline const char *test_self(void) {
  static char self[4096];
  if (!self[0]) {
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = '\0';
  }
  return self;
}

/* Run this program again as `SELF ARGS...` (args: NULL-terminated, args[0]
 * the first after the program's name), with the environment variable var
 * set to val unless var is NULL: its wait status. */
static inline int test_run_self(const char *var, const char *val,
                                const char *const *args) {
  const char *argv[16] = {test_self()};
  for (int i = 0; args[i] && i < 14; i++)
    argv[i + 1] = args[i];
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (var)
      setenv(var, val, 1);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  return st;
}

/* Read fd to its end into out (at most n - 1 bytes, NUL-terminated) and
 * close it. */
static inline void test_read_all(int fd, char *out, size_t n) {
  size_t got = 0;
  ssize_t k;
  while (got < n - 1 && (k = read(fd, out + got, n - 1 - got)) > 0)
    got += (size_t)k;
  out[got] = '\0';
  close(fd);
}

/* Run fn in a child whose stderr is captured into out (no core file): its
 * wait status. For calls that stop the program. */
static inline int test_run_stopping(void (*fn)(void), char *out, size_t n) {
  int fd[2];
  CHECK(pipe(fd) == 0);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none); /* no core file for the abort */
    dup2(fd[1], 2);
    fn();
    _exit(0);
  }
  close(fd[1]);
  test_read_all(fd[0], out, n);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  return st;
}

/* xorshift64*: deterministic test randomness. */
static inline uint64_t test_rand(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

#endif
