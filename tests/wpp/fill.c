// SPDX-License-Identifier: Apache-2.0
// fill.c -- WPP test of a full file system: allocate and write 1 MiB blocks
// until malloc fails, say how far it got, wait (the test power-fails it
// here), then free everything, allocate a few blocks again and end. Under
// WPP on a small tmpfs the failure must be a NULL from malloc, never a
// SIGBUS, and the context must stay resumable.
// Usage: fill [wait-ms]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
  long wait_ms = argc > 1 ? atol(argv[1]) : 0;
  static char *blk[100000];
  long n = 0;
  while (n < 100000 && (blk[n] = malloc(1 << 20)) != NULL) {
    memset(blk[n], (int)(n + 1), 1 << 20);
    n++;
  }
  printf("full after %ld MiB\n", n);
  fflush(stdout);
  for (long t = 0; t < wait_ms; t += 10) {
    struct timespec d = {0, 10000000};
    nanosleep(&d, NULL);
  }
  long bad = 0;
  for (long i = 0; i < n; i++) {
    bad += blk[i][12345] != (char)(i + 1);
    free(blk[i]);
  }
  for (int i = 0; i < 4; i++)
    if (!(blk[i] = malloc(1 << 20)))
      bad++;
    else
      memset(blk[i], 1, 1 << 20);
  printf("done: %ld blocks damaged\n", bad);
  return 0;
}
