// SPDX-License-Identifier: Apache-2.0
// owners.c -- WPP golden test of the locks that record their owner's thread
// id: three threads take a recursive mutex twice and an error-checking one,
// and hold a FILE with flockfile across several writes to it. The harness
// runs it without a pid namespace, where thread ids change at a restore: a
// thread stopped while holding one of these must still be its owner after
// the restore, or its next nested lock waits for itself forever.
// Usage: owners FILE [iterations]
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t rec, chk;
static long counter, checked;
static FILE *log_file;
static int iters = 30000;

static void *work(void *a) {
  long id = (long)a;
  for (int i = 0; i < iters; i++) {
    pthread_mutex_lock(&rec);
    pthread_mutex_lock(&rec);
    counter++;
    for (volatile int k = 0; k < 50; k++)
      ;
    pthread_mutex_unlock(&rec);
    pthread_mutex_unlock(&rec);
    if (pthread_mutex_lock(&chk) == 0) {
      checked++;
      pthread_mutex_unlock(&chk);
    }
    flockfile(log_file);
    fprintf(log_file, "%ld:%d\n", id, i);
    fputs("--\n", log_file);
    funlockfile(log_file);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  if (argc > 2)
    iters = atoi(argv[2]);
  pthread_mutexattr_t at;
  pthread_mutexattr_init(&at);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&rec, &at);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&chk, &at);
  log_file = fopen(argv[1], "w");
  if (!log_file)
    return 1;
  pthread_t t[3];
  for (long i = 0; i < 3; i++)
    pthread_create(&t[i], NULL, work, (void *)i);
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
  long size = ftell(log_file);
  fclose(log_file);
  printf("counter=%ld checked=%ld log-bytes=%ld\n", counter, checked, size);
  return 0;
}
