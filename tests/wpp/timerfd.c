// SPDX-License-Identifier: Apache-2.0
// timerfd.c -- WPP golden test: timerfds come back armed. A periodic 1 ms
// timerfd is read until 300 expirations have been counted; a one-shot
// timerfd armed for an hour must still be armed at the end, with its
// interval. A timerfd rebuilt disarmed stalls the loop.
// Usage: timerfd [expirations]
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <unistd.h>

int main(int argc, char **argv) {
  long want = argc > 1 ? atol(argv[1]) : 300;
  int tick = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  int hour = timerfd_create(CLOCK_MONOTONIC, 0);
  struct itimerspec p = {{0, 1000000}, {0, 1000000}};
  struct itimerspec h = {{7, 0}, {3600, 0}};
  if (tick < 0 || hour < 0 || timerfd_settime(tick, 0, &p, NULL) ||
      timerfd_settime(hour, 0, &h, NULL))
    return 1;
  long total = 0;
  while (total < want) {
    struct pollfd pf = {tick, POLLIN, 0};
    if (poll(&pf, 1, 2000) != 1) {
      printf("timerfd stalled after %ld expirations\n", total);
      return 0;
    }
    uint64_t n;
    if (read(tick, &n, 8) == 8)
      total += (long)n;
  }
  struct itimerspec a, b;
  timerfd_gettime(tick, &a);
  timerfd_gettime(hour, &b);
  printf("expirations>=%ld interval_ns=%ld hour_armed=%d hour_interval=%ld\n",
         want, a.it_interval.tv_nsec,
         b.it_value.tv_sec > 3000 && b.it_value.tv_sec <= 3600,
         (long)b.it_interval.tv_sec);
  return 0;
}
