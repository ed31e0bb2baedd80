// SPDX-License-Identifier: Apache-2.0
// fmap.c -- WPP golden test: mappings of files come back. The program maps
// a data file it wrote (read-only, shared) and a counter file (read-write,
// shared), and calls localtime, which makes libc map /etc/localtime and keep
// the mapping; it then sums the data file over and over, counting rounds in
// the counter file, and calls localtime again. A mapping missing after a
// restore is a segmentation fault.
// Usage: fmap PREFIX [rounds]
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WORDS (1 << 18)

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long rounds = argc > 2 ? atol(argv[2]) : 5000;
  char data[4096], count[4096];
  snprintf(data, sizeof(data), "%s.data", argv[1]);
  snprintf(count, sizeof(count), "%s.count", argv[1]);
  int d = open(data, O_RDWR | O_CREAT | O_TRUNC, 0644);
  int c = open(count, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (d < 0 || c < 0 || ftruncate(c, 4096))
    return 1;
  static uint32_t words[WORDS];
  for (uint32_t i = 0; i < WORDS; i++)
    words[i] = i;
  if (write(d, words, sizeof(words)) != (ssize_t)sizeof(words))
    return 1;
  const uint32_t *w = mmap(NULL, WORDS * 4, PROT_READ, MAP_SHARED, d, 0);
  long *n = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, c, 0);
  if (w == MAP_FAILED || n == MAP_FAILED)
    return 1;
  close(d);
  close(c);
  time_t t0 = 86400 * 200;
  struct tm a, b;
  localtime_r(&t0, &a);
  uint64_t sum = 0;
  for (*n = 0; *n < rounds; ++*n)
    for (uint32_t i = 0; i < WORDS; i++)
      sum += w[i] ^ (uint32_t)*n;
  localtime_r(&t0, &b);
  printf("sum=%llu rounds=%ld same_time=%d\n", (unsigned long long)sum, *n,
         a.tm_hour == b.tm_hour && a.tm_yday == b.tm_yday);
  return 0;
}
