// SPDX-License-Identifier: Apache-2.0
// ptimer.c -- WPP golden test: POSIX timers come back under the same timer_t,
// armed. A 1 ms periodic timer signals SIGUSR2 with a value, taken with
// sigtimedwait (overruns counted); a 2 ms SIGEV_THREAD timer runs a
// function on libc's timer thread; a SIGEV_NONE timer armed for an hour
// must still be armed at the end; all three must delete cleanly. A timer
// not rebuilt stalls the loop or fails timer_gettime.
// Usage: ptimer [expirations]
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static atomic_long calls;

static void on_timer(union sigval v) {
  if (v.sival_int == 7)
    atomic_fetch_add(&calls, 1);
}

int main(int argc, char **argv) {
  long want = argc > 1 ? atol(argv[1]) : 300;
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGUSR2);
  sigprocmask(SIG_BLOCK, &m, NULL);
  timer_t sig, thr, none;
  struct sigevent es = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR2};
  es.sigev_value.sival_int = 42;
  struct sigevent et = {.sigev_notify = SIGEV_THREAD,
                        .sigev_notify_function = on_timer};
  et.sigev_value.sival_int = 7;
  struct sigevent en = {.sigev_notify = SIGEV_NONE};
  struct itimerspec ms1 = {{0, 1000000}, {0, 1000000}};
  struct itimerspec ms2 = {{0, 2000000}, {0, 2000000}};
  struct itimerspec hour = {{0, 0}, {3600, 0}};
  if (timer_create(CLOCK_MONOTONIC, &es, &sig) ||
      timer_create(CLOCK_MONOTONIC, &et, &thr) ||
      timer_create(CLOCK_MONOTONIC, &en, &none) ||
      timer_settime(sig, 0, &ms1, NULL) || timer_settime(thr, 0, &ms2, NULL) ||
      timer_settime(none, 0, &hour, NULL))
    return 1;
  /* progress is counted in signals, not in time, which goes on while the
   * program is down: 2000 signals (2 s) without a call is a stall */
  long total = 0, last = 0, since = 0;
  struct timespec wait = {2, 0};
  while (total < want || atomic_load(&calls) < want / 2) {
    siginfo_t si;
    if (atomic_load(&calls) != last) {
      last = atomic_load(&calls);
      since = 0;
    }
    if (sigtimedwait(&m, &si, &wait) != SIGUSR2 || ++since > 2000) {
      printf("timer stalled after %ld signals, %ld calls\n", total,
             atomic_load(&calls));
      return 0;
    }
    if (si.si_value.sival_int != 42) {
      printf("signal with value %d\n", si.si_value.sival_int);
      return 0;
    }
    total += 1 + si.si_overrun;
  }
  struct itimerspec a, b;
  int got = timer_gettime(sig, &a) == 0 && timer_gettime(none, &b) == 0;
  printf("signals>=%ld calls>=%ld gettime=%d interval_ns=%ld hour_armed=%d "
         "deleted=%d\n",
         want, want / 2, got, got ? a.it_interval.tv_nsec : -1L,
         got && b.it_value.tv_sec > 3000,
         !timer_delete(sig) && !timer_delete(thr) && !timer_delete(none));
  return 0;
}
