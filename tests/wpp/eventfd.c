// SPDX-License-Identifier: Apache-2.0
// eventfd.c -- WPP golden test: eventfds come back with their counter and
// flags. A producer thread posts 200,000 tokens in batches of 100 to a
// semaphore eventfd (EFD_SEMAPHORE: each read takes one) and adds 1..2000
// to a plain, non-blocking counter nobody reads until the end; the main
// thread takes the tokens one by one (polling). A counter rebuilt at zero
// stalls the reader or changes the sum; a lost EFD_SEMAPHORE changes the read
// count. Usage: eventfd [batches]
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int sem, acc;
static long batches = 2000;

static void *producer(void *a) {
  (void)a;
  for (long i = 1; i <= batches; i++) {
    uint64_t v = 100, w = (uint64_t)i;
    if (write(sem, &v, 8) != 8 || write(acc, &w, 8) != 8)
      abort();
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1)
    batches = atol(argv[1]);
  sem = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC | EFD_NONBLOCK);
  acc = eventfd(0, EFD_NONBLOCK);
  if (sem < 0 || acc < 0)
    return 1;
  pthread_t p;
  pthread_create(&p, NULL, producer, NULL);
  long reads = 0, want = batches * 100;
  while (reads < want) {
    struct pollfd pf = {sem, POLLIN, 0};
    uint64_t v;
    if (poll(&pf, 1, 2000) != 1) {
      printf("eventfd stalled after %ld of %ld reads\n", reads, want);
      return 0;
    }
    if (read(sem, &v, 8) != 8)
      continue; /* EAGAIN: poll again */
    reads += (long)v;
    if (v != 1) {
      printf("a semaphore read returned %llu\n", (unsigned long long)v);
      return 0;
    }
  }
  pthread_join(p, NULL);
  uint64_t sum = 0;
  if (read(acc, &sum, 8) != 8)
    return 3;
  uint64_t again;
  int nonblock = read(acc, &again, 8) < 0 && (fcntl(acc, F_GETFL) & O_NONBLOCK);
  printf("reads=%ld sum=%llu nonblock=%d cloexec=%d\n", reads,
         (unsigned long long)sum, nonblock,
         (fcntl(sem, F_GETFD) & FD_CLOEXEC) != 0);
  return 0;
}
