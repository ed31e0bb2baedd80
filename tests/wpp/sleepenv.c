// SPDX-License-Identifier: Apache-2.0
// sleepenv.c -- WPP golden test: a thread that sleeps in steps (nanosleep,
// usleep, sleep) and checks with CLOCK_MONOTONIC that no step ended early,
// while main reads an environment variable and the clocks, and waits for an
// alarm set at the start. A failure during a sleep must not cut it short, the
// alarm must still ring after a restore, and getenv/clock_gettime must work
// after one (the environment is the one the program started with).
// Usage: sleepenv [steps]
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int steps = 6;
static int early;
static volatile sig_atomic_t rang;

static void on_alarm(int sig) { rang = sig == SIGALRM; }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *sleeper(void *a) {
  (void)a;
  for (int i = 0; i < steps; i++) {
    double t0 = now(), want;
    if (i % 3 == 0) {
      struct timespec d = {0, 150000000};
      nanosleep(&d, NULL);
      want = 0.15;
    } else if (i % 3 == 1) {
      usleep(100000);
      want = 0.10;
    } else {
      sleep(1);
      want = 1.0;
    }
    if (now() - t0 < want - 0.002)
      early++;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1)
    steps = atoi(argv[1]);
  const char *v0 = getenv("SLEEPENV_TAG");
  char tag[64];
  snprintf(tag, sizeof(tag), "%s", v0 ? v0 : "(unset)");
  signal(SIGALRM, on_alarm);
  alarm(1);
  pthread_t t;
  pthread_create(&t, NULL, sleeper, NULL);
  int reads = 0, same = 0;
  double t0 = now(), last = t0;
  int backwards = 0;
  while (1) {
    const char *v = getenv("SLEEPENV_TAG");
    same += v && !strcmp(v, tag);
    reads++;
    double n = now();
    backwards += n < last;
    last = n;
    struct timespec d = {0, 20000000};
    nanosleep(&d, NULL);
    if (pthread_tryjoin_np(t, NULL) == 0)
      break;
  }
  while (!rang)
    pause();
  printf("tag=%s env-stable=%s clock-backwards=%d sleeps-early=%d alarm=yes\n",
         tag, same == reads ? "yes" : "no", backwards, early);
  return 0;
}
