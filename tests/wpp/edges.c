// SPDX-License-Identifier: Apache-2.0
// edges.c -- WPP tests of cases an independent review found broken, one per
// mode argument; each prints one line that must match the native run after
// a power failure in the middle:
//   tls       4 KiB of TLS: the first thread's struct is not in static data
//   cancel    pthread_cancel after the restore (musl's own signal handler)
//   exitmain  main calls pthread_exit and the last thread ends the process
//   pipe      200 KiB unread in a pipe enlarged with F_SETPIPE_SZ
//   sigpipe   a write to a closed pipe kills the program (default action)
//   eintr     a poll with no signal handler in the program: it never returns
//             EINTR natively, nor after a restore
//   pending   signals blocked and pending at the failure (a standard one and
//             two queued real-time ones with values) are pending after it
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__thread char big[4096];

static void *spin(void *a) {
  for (;;) {
    usleep(1000);
    pthread_testcancel();
  }
  return a;
}

static void *finish(void *a) {
  usleep(900000);
  printf("exitmain: the last thread ended the process\n");
  return a;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "tls";
  big[1] = 1;
  if (!strcmp(mode, "tls")) {
    for (int i = 0; i < 8; i++)
      usleep(100000);
    printf("tls %d\n", big[1]);
  } else if (!strcmp(mode, "cancel")) {
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, spin, NULL);
    usleep(800000);
    pthread_cancel(t);
    pthread_join(t, &r);
    printf("cancel %d\n", r == PTHREAD_CANCELED);
  } else if (!strcmp(mode, "exitmain")) {
    pthread_t t;
    pthread_create(&t, NULL, finish, NULL);
    pthread_exit(NULL);
  } else if (!strcmp(mode, "pipe")) {
    int p[2];
    char b[4096];
    long n = 0;
    ssize_t r;
    if (pipe(p) != 0 || fcntl(p[1], F_SETPIPE_SZ, 1 << 20) < 0)
      return 1;
    memset(b, 'x', sizeof(b));
    for (int i = 0; i < 50; i++)
      if (write(p[1], b, sizeof(b)) != (ssize_t)sizeof(b))
        return 1;
    usleep(800000);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    while ((r = read(p[0], b, sizeof(b))) > 0)
      n += r;
    printf("pipe %ld\n", n);
  } else if (!strcmp(mode, "sigpipe")) {
    int p[2];
    if (pipe(p) != 0)
      return 1;
    close(p[0]);
    usleep(800000);
    if (write(p[1], "x", 1) < 0)
      return 1;
    printf("not killed\n");
  } else if (!strcmp(mode, "eintr")) {
    int p[2];
    if (pipe(p) != 0)
      return 1;
    struct pollfd pf = {p[0], POLLIN, 0};
    int r = poll(&pf, 1, 800);
    printf("poll %d\n", r);
  } else if (!strcmp(mode, "pending")) {
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR1);
    sigaddset(&m, SIGRTMIN + 2);
    sigprocmask(SIG_BLOCK, &m, NULL);
    kill(getpid(), SIGUSR1);
    for (int v = 5; v < 7; v++)
      sigqueue(getpid(), SIGRTMIN + 2, (union sigval){.sival_int = v});
    usleep(800000);
    struct timespec zero = {0, 0};
    siginfo_t si;
    printf("pending:");
    while (sigtimedwait(&m, &si, &zero) > 0)
      printf(" %s/%d", si.si_signo == SIGUSR1 ? "usr1" : "rt",
             si.si_value.sival_int);
    printf("\n");
  } else {
    return 2;
  }
  return 0;
}
