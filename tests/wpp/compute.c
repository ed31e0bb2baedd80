// SPDX-License-Identifier: Apache-2.0
// compute.c -- WPP golden test: worker threads that churn malloc/free, do
// floating point, and meet at a mutex and a barrier every round. The printed
// totals depend on every round having run exactly once, in order.
// Usage: compute [threads] [rounds]
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static double total;
static long counter;
static int rounds = 300;

static void *work(void *a) {
  long id = (long)a;
  double acc = 0;
  for (int round = 0; round < rounds; round++) {
    char *blocks[64];
    for (int i = 0; i < 64; i++) {
      blocks[i] = malloc(16 + (size_t)((i * 37 + round) % 4000));
      memset(blocks[i], i, 16);
    }
    for (long i = 0; i < 100000; i++)
      acc += sin((double)(i + id + round)) * 1e-3;
    long sum = 0;
    for (int i = 0; i < 64; i++) {
      sum += blocks[i][i % 16];
      free(blocks[i]);
    }
    pthread_mutex_lock(&mu);
    total += acc;
    counter += sum;
    pthread_mutex_unlock(&mu);
    pthread_barrier_wait(&bar);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  if (argc > 2)
    rounds = atoi(argv[2]);
  if (n < 1 || n > 16)
    return 2;
  pthread_t t[16];
  pthread_barrier_init(&bar, NULL, (unsigned)n);
  for (long i = 0; i < n; i++)
    pthread_create(&t[i], NULL, work, (void *)i);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  printf("threads=%d rounds=%d counter=%ld total=%.9f\n", n, rounds, counter,
         total);
  return 0;
}
