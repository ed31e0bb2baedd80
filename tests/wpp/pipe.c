// SPDX-License-Identifier: Apache-2.0
// pipe.c -- WPP golden test: a producer thread writes records into a pipe
// and a consumer thread reads them back and sums them. Bytes in the pipe at
// the failure are kernel state: they must be back in the pipe after it.
// Usage: pipe [records]
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int fds[2];
static long records = 3000000;

static void *producer(void *a) {
  (void)a;
  for (long i = 0; i < records; i++) {
    long v = i * 7 + 3;
    if (write(fds[1], &v, sizeof(v)) != sizeof(v))
      abort();
  }
  close(fds[1]);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1)
    records = atol(argv[1]);
  if (pipe(fds) != 0)
    return 1;
  pthread_t p;
  pthread_create(&p, NULL, producer, NULL);
  long sum = 0, n = 0, v;
  size_t have = 0;
  char *buf = (char *)&v;
  for (;;) {
    ssize_t r = read(fds[0], buf + have, sizeof(v) - have);
    if (r <= 0)
      break;
    have += (size_t)r;
    if (have == sizeof(v)) {
      sum += v;
      n++;
      have = 0;
    }
  }
  pthread_join(p, NULL);
  printf("records=%ld sum=%ld\n", n, sum);
  return 0;
}
