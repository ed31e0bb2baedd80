// SPDX-License-Identifier: Apache-2.0
// flock.c -- WPP golden test: file locks are taken again at a restore. The
// program holds an flock, a POSIX record lock and an OFD lock on three
// files, works for a while, and then probes each lock from a new open file
// of its own (locks of different open files conflict, even in one process).
// A lock not taken again shows as free.
// Usage: flock PREFIX [rounds]
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static char path[3][4096];

/* Whether a write lock on byte `at` of file i conflicts with a lock: asked
 * through fd, an open file of its own. Never closed here: closing any
 * descriptor of a file drops the process's POSIX locks on it. */
static int held(int fd, short at) {
  struct flock l = {
      .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at, .l_len = 1};
  return fcntl(fd, F_OFD_GETLK, &l) == 0 && l.l_type != F_UNLCK;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long rounds = argc > 2 ? atol(argv[2]) : 80000000;
  const char *sfx[3] = {".flock", ".posix", ".ofd"};
  int fd[3];
  for (int i = 0; i < 3; i++) {
    snprintf(path[i], sizeof(path[i]), "%s%s", argv[1], sfx[i]);
    fd[i] = open(path[i], O_RDWR | O_CREAT, 0644);
    if (fd[i] < 0)
      return 1;
  }
  struct flock pl = {
      .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 100};
  struct flock ol = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
  if (flock(fd[0], LOCK_EX) || fcntl(fd[1], F_SETLK, &pl) ||
      fcntl(fd[2], F_OFD_SETLK, &ol))
    return 3;
  uint64_t h = 1469598103934665603ull;
  for (long i = 0; i < rounds; i++)
    h = (h ^ (uint64_t)i) * 1099511628211ull;
  int probe[3];
  for (int i = 0; i < 3; i++)
    probe[i] = open(path[i], O_RDWR);
  int fl = flock(probe[0], LOCK_EX | LOCK_NB) != 0;
  int in = held(probe[1], 150), out = held(probe[1], 250);
  printf("work=%016llx flock=%d posix=%d,%d ofd=%d\n", (unsigned long long)h,
         fl, in, out, held(probe[2], 0));
  return 0;
}
