// SPDX-License-Identifier: Apache-2.0
// signalfd.c -- WPP golden test: a signalfd comes back with its mask, and a
// signal pending for the process at the failure is still pending after it.
// A sender thread sends SIGUSR1 to the process 5,000 times, each time
// waiting until the main thread has read it from a signalfd (a signal lost
// at the failure stalls the sender). SIGUSR1 is blocked, as signalfd needs.
// Usage: signalfd [signals]
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

static atomic_long acked;
static long want = 5000;

static void *sender(void *a) {
  (void)a;
  for (long i = 0; i < want; i++) {
    kill(getpid(), SIGUSR1);
    /* naps, not time, which goes on while the program is down: about 2 s
     * of them without an answer is a lost signal */
    for (long naps = 0; atomic_load(&acked) <= i; naps++) {
      if (naps > 40000) {
        printf("signal %ld was lost\n", i);
        fflush(stdout);
        _exit(0);
      }
      struct timespec nap = {0, 20000};
      nanosleep(&nap, NULL);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1)
    want = atol(argv[1]);
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &m, NULL);
  int sfd = signalfd(-1, &m, SFD_CLOEXEC);
  if (sfd < 0)
    return 1;
  pthread_t s;
  pthread_create(&s, NULL, sender, NULL);
  long got = 0;
  while (got < want) {
    struct pollfd pf = {sfd, POLLIN, 0};
    struct signalfd_siginfo si;
    if (poll(&pf, 1, 3000) != 1) {
      printf("signalfd stalled after %ld signals\n", got);
      return 0;
    }
    if (read(sfd, &si, sizeof(si)) != sizeof(si) || si.ssi_signo != SIGUSR1)
      return 2;
    atomic_store(&acked, ++got);
  }
  pthread_join(s, NULL);
  printf("signals=%ld\n", got);
  return 0;
}
