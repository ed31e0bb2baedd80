// SPDX-License-Identifier: Apache-2.0
// tally.c -- the program `pmkit demo` carries through the modes: a list of
// amounts and their running total, kept in a pmkit pool. No flush, fence or
// log is written anywhere; the mode it is built in decides what a crash can
// leave.
//
//   tally run POOL N        create POOL and append N amounts
//   tally check POOL        what a restart finds (after pmkit_recover): exit 1
//                           if the amounts counted are not all written, or the
//                           total is neither their sum nor their sum plus the
//                           amount being appended (an append cut between its
//                           total and its count, which a recovery can finish)
//   tally check-exact POOL  the same, but the total must be exactly the sum:
//                           every append all or nothing
//   tally count N           (-DTALLY_HEAP: the list in ordinary memory, for
//                           whole-process persistence) append N amounts,
//                           printing each, and the final sum
//
// Built in robust mode the stores reach PM in program order, so `check`
// holds after any crash and `check-exact` does not: ordering is not
// atomicity. Built in clobber or ssapp mode each append is failure-atomic and
// `check-exact` holds. Built with no mode, a volatile cache may write the
// count back before the amount it counts, and `check` fails. Compiled as C++
// with -DTALLY_ARP, the order is stated in the language's terms (ARP: a
// sequence point between the steps) and arp mode makes it hold.
#include <pmkit/pmkit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX 4096

#ifdef TALLY_ARP // C++, arp mode: each step persists before the next
#include <pmkit/arp.hpp>
#define STEP() pmkit::sequence_point()
#else
#define STEP()
#endif

struct root {
  long n;     // amounts appended
  long total; // their sum
  char pad[48];
  long amount[MAX]; // from the next cache line on
};

static long amount_of(long i) { return i * 7919 % 1000 + 1; }

PMKIT_FASE static void append(struct root *r, long v) {
  r->amount[r->n] = v;
  STEP();
  r->total = r->total + v;
  STEP();
  r->n = r->n + 1;
}

#ifdef TALLY_HEAP
int main(int argc, char **argv) {
  long n = argc == 3 && !strcmp(argv[1], "count") ? atol(argv[2]) : 0;
  struct root *r = calloc(1, sizeof *r);
  if (n < 1 || n > MAX || !r) {
    fprintf(stderr, "usage: tally count N (1..%d)\n", MAX);
    return 2;
  }
  for (long i = 0; i < n; i++) {
    append(r, amount_of(i));
    printf("append %ld: %ld, total %ld\n", i, r->amount[i], r->total);
    fflush(stdout);
    struct timespec ms = {0, 1000000}; // a millisecond: the run takes a while
    nanosleep(&ms, NULL);
  }
  long sum = 0;
  for (long i = 0; i < r->n; i++)
    sum += r->amount[i];
  printf("%ld amounts, total %ld, sum %ld\n", r->n, r->total, sum);
  return r->total == sum ? 0 : 1;
}
#else
int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "run") && strcmp(argv[1], "check") &&
                   strcmp(argv[1], "check-exact"))) {
    fprintf(stderr,
            "usage: tally run POOL N | check POOL | check-exact POOL\n");
    return 2;
  }
  int run = !strcmp(argv[1], "run");
  long n = run && argc > 3 ? atol(argv[3]) : 0;
  pmkit_pool *pool;
  struct root *r;
  if ((run ? pmkit_pool_create(argv[2], 2 << 20, NULL, &pool)
           : pmkit_pool_open(argv[2], NULL, &pool)) ||
      pmkit_root(pool, sizeof *r, (void **)&r)) {
    fprintf(stderr, "tally: %s\n", pmkit_errormsg());
    return 2;
  }
  if (run) {
    if (n < 1 || n > MAX)
      return 2;
    for (long i = 0; i < n; i++) {
      pmkit_mark_begin("append"); // crash points: inside the appends only
      append(r, amount_of(i));
      pmkit_mark_end("append");
    }
  } else {
    if (pmkit_recover(pool) < 0) {
      printf("pmkit_recover failed: %s\n", pmkit_errormsg());
      return 1;
    }
    if (r->n < 0 || r->n > MAX) {
      printf("the count %ld is not one\n", r->n);
      return 1;
    }
    long sum = 0;
    for (long i = 0; i < r->n; i++) {
      if (r->amount[i] != amount_of(i)) {
        printf("amount %ld is counted but not written (%ld)\n", i,
               r->amount[i]);
        return 1;
      }
      sum += r->amount[i];
    }
    int exact = !strcmp(argv[1], "check-exact");
    int inflight = r->n < MAX && r->amount[r->n] == amount_of(r->n) &&
                   r->total == sum + amount_of(r->n);
    if (r->total != sum && (exact || !inflight)) {
      printf("the total %ld is not the sum %ld of the %ld amounts%s\n",
             r->total, sum, r->n, inflight ? " (an append was cut)" : "");
      return 1;
    }
  }
  pmkit_pool_close(pool);
  return 0;
}
#endif
