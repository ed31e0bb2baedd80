// SPDX-License-Identifier: Apache-2.0
// churn.c -- WPP golden test: threads created and ending all the time, both
// joined and detached, each leaving its result in a shared table. A failure
// lands in thread start-up and exit as often as in the work.
// Usage: churn [generations]
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define WIDTH 6
static long results[WIDTH];
static atomic_int detached_done;

static void *child(void *a) {
  long id = (long)a, x = id;
  for (int i = 0; i < 20000; i++)
    x = (x * 6364136223846793005L + 1442695040888963407L) >> 1;
  results[id % WIDTH] += x & 0xffff;
  return (void *)(x & 0xff);
}

static void *detached(void *a) {
  child(a);
  atomic_fetch_add(&detached_done, 1);
  return NULL;
}

int main(int argc, char **argv) {
  int gens = argc > 1 ? atoi(argv[1]) : 3000;
  long joined = 0;
  for (int g = 0; g < gens; g++) {
    pthread_t t[WIDTH - 1], d;
    for (long i = 0; i < WIDTH - 1; i++)
      pthread_create(&t[i], NULL, child, (void *)(g * WIDTH + i));
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_create(&d, &at, detached, (void *)(long)(g * WIDTH + WIDTH - 1));
    for (int i = 0; i < WIDTH - 1; i++) {
      void *r;
      pthread_join(t[i], &r);
      joined += (long)r;
    }
    while (atomic_load(&detached_done) <= g)
      ; /* the detached one must finish too: results are per generation */
  }
  long sum = 0;
  for (int i = 0; i < WIDTH; i++)
    sum += results[i];
  printf("generations=%d joined=%ld sum=%ld\n", gens, joined, sum);
  return 0;
}
