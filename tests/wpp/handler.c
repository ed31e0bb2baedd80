// SPDX-License-Identifier: Apache-2.0
// handler.c -- WPP test of the failure handler: the program installs a
// SIGPWR handler, which the runtime calls once after each restore (on the
// thread running main, before any thread resumes) and never at the failure.
// With "exit" as argument the handler ends the program with status 3.
// Prints how often it ran.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int calls, threads_seen_running;
static volatile long progress;
static int exit_in_handler;

static void on_power_failure(int sig, siginfo_t *si, void *uc) {
  (void)si;
  calls++;
  if (sig != SIGPWR || !uc)
    abort();
  if (exit_in_handler) {
    printf("handler exits after %d call(s)\n", calls);
    exit(3);
  }
}

int main(int argc, char **argv) {
  exit_in_handler = argc > 1 && !strcmp(argv[1], "exit");
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_power_failure;
  sa.sa_flags = SA_SIGINFO;
  if (sigaction(SIGPWR, &sa, NULL) != 0)
    return 1;
  for (long i = 0; i < 60; i++) {
    usleep(20000);
    progress = i;
  }
  printf("handler calls=%d progress=%ld\n", calls, progress);
  return 0;
}
