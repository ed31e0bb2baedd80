// SPDX-License-Identifier: Apache-2.0
// dupfd.c -- WPP golden test: descriptors that share an open file come back
// sharing it. Numbered records go to one file through three descriptors of
// one open file (dup, F_DUPFD) in turn, so each write lands after the last
// one made through any of them; at the end the file must hold every record
// in order. The summary is printed through a dup of standard output. Shared
// offsets lost at a restore make the writes overwrite each other.
// Usage: dupfd FILE [records]
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long n = argc > 2 ? atol(argv[2]) : 150000;
  int out = dup(1);
  int fd[3];
  fd[0] = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  fd[1] = dup(fd[0]);
  fd[2] = fcntl(fd[0], F_DUPFD, 50);
  if (out < 0 || fd[0] < 0 || fd[1] < 0 || fd[2] < 0)
    return 1;
  char rec[24];
  for (long i = 0; i < n; i++) {
    snprintf(rec, sizeof(rec), "%09ld\n", i);
    if (write(fd[i % 3], rec, 10) != 10)
      return 3;
  }
  long good = 0, size = lseek(fd[1], 0, SEEK_CUR);
  FILE *f = fopen(argv[1], "r");
  char line[32];
  while (f && fgets(line, sizeof(line), f) && atol(line) == good)
    good++;
  dprintf(out, "records=%ld in_order=%ld size=%ld cloexec=%d,%d,%d\n", n, good,
          size, (fcntl(fd[0], F_GETFD) & FD_CLOEXEC) != 0,
          (fcntl(fd[1], F_GETFD) & FD_CLOEXEC) != 0,
          (fcntl(fd[2], F_GETFD) & FD_CLOEXEC) != 0);
  return 0;
}
