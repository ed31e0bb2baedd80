/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_flush_domain.c -- the environment switches read at start-up:
 * PMKIT_DOMAIN picks adr or eadr (no flushes), PMKIT_FLUSH overrides the
 * CPUID choice or is refused with a warning, and crash emulation:
 * PMKIT_CRASH_AT ends the process at the N-th crash point with
 * PMKIT_CRASH_EXIT, PMKIT_CRASH_SEED at a reproducible random one, and
 * PMKIT_CRASH_REPORT counts them. Each case runs this program again with
 * the variables set; the child prints what it saw.
 * Usage: test_flush_domain [child]
 */
#include <sys/wait.h>

#include "testutil.h"

/* Run the child with `env` (NAME=VALUE ...), capture stdout, return status. */
static int run(const char *const *env, char *out, size_t n) {
  int fd[2];
  CHECK(pipe(fd) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    unsetenv("PMKIT_DOMAIN");
    unsetenv("PMKIT_FLUSH");
    for (; *env; env++)
      putenv((char *)*env);
    execl(test_self(), test_self(), "child", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  test_read_all(fd[0], out, n);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
  return WEXITSTATUS(st);
}

static int child(void) {
  printf("domain=%s flush=%s\n",
         pmkit_domain() == PMKIT_DOMAIN_EADR ? "eadr" : "adr",
         pmkit_flush_name(pmkit_flush_kind()));
  fflush(stdout);
  static char buf[4096];
  for (int i = 0; i < 100000; i++) {
    pmkit_flush(buf, sizeof buf);
    pmkit_fence(); /* a crash point */
    printf("%d\n", i + 1);
    fflush(stdout);
  }
  return 0;
}

static char out[1 << 20], out2[1 << 20];

/* By default: the adr domain with a real flush. */
static void adr_by_default(void) {
  const char *e1[] = {"PMKIT_CRASH_AT=1", NULL};
  CHECK(run(e1, out, sizeof out) == PMKIT_CRASH_EXIT);
  CHECK(strstr(out, "domain=adr") && !strstr(out, "flush=none"));
}

/* PMKIT_DOMAIN=eadr: no flushes. */
static void eadr_domain(void) {
  const char *e2[] = {"PMKIT_DOMAIN=eadr", "PMKIT_CRASH_AT=1", NULL};
  CHECK(run(e2, out, sizeof out) == PMKIT_CRASH_EXIT);
  CHECK(strstr(out, "domain=eadr flush=none"));
}

/* PMKIT_FLUSH overrides the CPUID choice... */
static void flush_override(void) {
  const char *e3[] = {"PMKIT_FLUSH=clflush", "PMKIT_CRASH_AT=1", NULL};
  CHECK(run(e3, out, sizeof out) == PMKIT_CRASH_EXIT);
  CHECK(strstr(out, "flush=clflush"));
}

/* ...or is refused with a warning. */
static void bogus_flush_refused(void) {
  const char *e4[] = {"PMKIT_FLUSH=bogus", "PMKIT_CRASH_AT=1", NULL};
  CHECK(run(e4, out, sizeof out) == PMKIT_CRASH_EXIT);
  CHECK(!strstr(out, "flush=bogus"));
}

/* The 5th crash point: four fences completed, no fifth. */
static void crash_at_fifth_point(void) {
  const char *e5[] = {"PMKIT_CRASH_AT=5", NULL};
  CHECK(run(e5, out, sizeof out) == PMKIT_CRASH_EXIT);
  CHECK(strstr(out, "\n4\n") && !strstr(out, "\n5\n"));
}

/* A seed gives the same point twice and a different one for another. */
static void crash_seed(void) {
  const char *e6[] = {"PMKIT_CRASH_SEED=7", "PMKIT_CRASH_EVERY=50", NULL};
  CHECK(run(e6, out, sizeof out) == PMKIT_CRASH_EXIT);
  CHECK(run(e6, out2, sizeof out2) == PMKIT_CRASH_EXIT);
  CHECK(strcmp(out, out2) == 0);
  const char *e7[] = {"PMKIT_CRASH_SEED=8", "PMKIT_CRASH_EVERY=50", NULL};
  CHECK(run(e7, out2, sizeof out2) == PMKIT_CRASH_EXIT);
  CHECK(strcmp(out, out2) != 0);
}

/* The report counts every point of a complete run. */
static void crash_report(void) {
  char rep[1100], env[1200];
  snprintf(rep, sizeof rep, "%s", test_pool_path("crash-report"));
  snprintf(env, sizeof env, "PMKIT_CRASH_REPORT=%s", rep);
  const char *e8[] = {env, NULL};
  CHECK(run(e8, out, sizeof out) == 0);
  FILE *f = fopen(rep, "r");
  unsigned long long cnt = 0;
  CHECK(f && fscanf(f, "%llu", &cnt) == 1 && cnt == 100000);
  fclose(f);
  unlink(rep);
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "child"))
    return child();
  test_self(); /* before a child mode's environment changes */
  TEST_CASE(adr_by_default);
  TEST_CASE(eadr_domain);
  TEST_CASE(flush_override);
  TEST_CASE(bogus_flush_refused);
  TEST_CASE(crash_at_fifth_point);
  TEST_CASE(crash_seed);
  TEST_CASE(crash_report);
  return test_summary();
}
