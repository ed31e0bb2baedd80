// SPDX-License-Identifier: Apache-2.0
// stdio.c -- WPP golden test: two threads take strict turns writing numbered
// lines through one buffered FILE to a file, and progress lines to stdout; at
// the end the program reads its file back and prints it. A failure in the
// middle of a buffered write must neither lose nor repeat a byte of either
// stream. Usage: stdio FILE [lines]
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *out;
static int lines = 4000;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long turn = 1;

static void *writer(void *a) {
  long id = (long)a;
  for (int i = 0; i < lines; i++) {
    pthread_mutex_lock(&mu);
    while (turn != id)
      pthread_cond_wait(&cv, &mu);
    fprintf(out, "writer %ld line %d: %08x\n", id, i,
            (unsigned)(i * 2654435761u));
    if (i % 50 == 0)
      printf("progress %ld %d\n", id, i);
    turn = 3 - id;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (volatile int k = 0; k < 100000; k++)
      ;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  if (argc > 2)
    lines = atoi(argv[2]);
  out = fopen(argv[1], "w");
  if (!out)
    return 1;
  pthread_t a, b;
  pthread_create(&a, NULL, writer, (void *)1);
  pthread_create(&b, NULL, writer, (void *)2);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  fclose(out);
  FILE *in = fopen(argv[1], "r");
  char buf[256];
  unsigned long h = 5381, n = 0;
  while (fgets(buf, sizeof(buf), in)) {
    for (char *p = buf; *p; p++)
      h = h * 33 + (unsigned char)*p;
    n++;
  }
  fclose(in);
  printf("file lines=%lu hash=%lx\n", n, h);
  return 0;
}
