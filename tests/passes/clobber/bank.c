// SPDX-License-Identifier: Apache-2.0
// A small bank in a pool, one FASE per transfer: two balances change, a
// history ring and its position advance, a fresh node is pushed on a list
// that keeps the four newest (the fifth is freed), and the count of
// transfers done moves on. `check` recovers the pool (pmkit_recover) and
// compares everything with a replay of transfers 0..done-1 in DRAM, so a
// lost, repeated or half-applied transfer fails it. Used by lit (below)
// and by tests/cli/test_clobber.py (crashes at every crash point, eADR;
// the explorer's x86 model, ADR; a build without logging must fail).
//
// Usage: bank run POOL N     create POOL or resume it; run to N transfers
//        bank check POOL [N] recover, verify; with N, require done == N
//
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -mllvm -pmkit-clobber-report \
// RUN:   %s %link_pmkit -o %t 2>&1 | %FileCheck %s --check-prefix=REPORT
// RUN: rm -f %t.pool && %t run %t.pool 50 && %t check %t.pool 50 | %FileCheck %s
// CHECK: ok: 50 transfers
//
// Under ADR the explorer's x86 model checks a traced build (1000 images a
// run: the default budget took minutes); with the logs left out
// (-pmkit-clobber-skip-log) or the write-backs (built for eADR) it must fail.
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -mllvm -pmkit-trace %s \
// RUN:   %link_trace -o %t.tr
// RUN: %explore --no-progress --budget 1000 --save-dir %t.d/ok --check '%t.tr check {pool}' \
// RUN:   -- %t.tr run %t.d/ok.pool 6 | %FileCheck %s --check-prefix=EXPLORE
// EXPLORE: result: no failure in {{[0-9]+}} sampled images (not a proof)
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -mllvm -pmkit-trace \
// RUN:   -mllvm -pmkit-clobber-skip-log %s %link_trace -o %t.nolog
// RUN: %not %explore --no-progress --budget 1000 --stop-after 1 --save-dir %t.d/nolog \
// RUN:   --check '%t.nolog check {pool}' -- %t.nolog run %t.d/nolog.pool 6 \
// RUN:   | %FileCheck %s --check-prefix=BITES
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -mllvm -pmkit-trace \
// RUN:   -mllvm -pmkit-clobber-domain=eadr %s %link_trace -o %t.nowb
// RUN: %not %explore --no-progress --budget 1000 --stop-after 1 --save-dir %t.d/nowb \
// RUN:   --check '%t.nowb check {pool}' -- %t.nowb run %t.d/nowb.pool 6 \
// RUN:   | %FileCheck %s --check-prefix=BITES
// BITES: result: FAILED: {{[0-9]+}} of {{[0-9]+}} crash images are inconsistent
// REPORT-LABEL: pmkit-clobber: transfer
// Balances are read, then written: clobber writes.
// REPORT: bank.c:[[#@LINE+34]]: store: logged: clobbers an input read
// REPORT: bank.c:[[#@LINE+34]]: store: logged: clobbers an input read
// The new node is memory this FASE allocated.
// REPORT: bank.c:[[#@LINE+38]]: store: not logged: memory this FASE allocated
#include <pmkit/pmkit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NACC 8
struct node {
  uint64_t v;
  struct node *next;
};
struct bank {
  uint64_t done;
  int64_t bal[NACC];
  uint64_t hist[16];
  uint64_t hpos;
  struct node *recent;
};

static pmkit_pool *pool;

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

PMKIT_FASE void transfer(struct bank *b, uint64_t i) {
  uint64_t r = mix(i);
  unsigned from = r % NACC, to = (r >> 8) % NACC;
  int64_t amt = (int64_t)((r >> 16) % 100);
  b->bal[from] -= amt;
  b->bal[to] += amt;
  b->hist[b->hpos % 16] = i;
  b->hpos++;
  struct node *n;
  if (pmkit_zalloc(pool, sizeof *n, (void **)&n))
    abort();
  n->v = i;
  n->next = b->recent;
  b->recent = n;
  struct node *k = n;
  for (int d = 1; d < 4 && k; d++)
    k = k->next;
  if (k && k->next) {
    struct node *old = k->next;
    k->next = NULL;
    pmkit_free(pool, old);
  }
  b->done = i + 1;
}

static int verify(struct bank *b, long want) {
  int64_t bal[NACC] = {0};
  for (uint64_t i = 0; i < b->done; i++) {
    uint64_t r = mix(i);
    int64_t amt = (int64_t)((r >> 16) % 100);
    bal[r % NACC] -= amt;
    bal[(r >> 8) % NACC] += amt;
  }
  for (unsigned a = 0; a < NACC; a++)
    if (bal[a] != b->bal[a])
      return printf("bad: account %u holds %lld, expected %lld after %llu\n", a,
                    (long long)b->bal[a], (long long)bal[a],
                    (unsigned long long)b->done),
             1;
  if (b->hpos != b->done)
    return printf("bad: history at %llu, done %llu\n",
                  (unsigned long long)b->hpos, (unsigned long long)b->done),
           1;
  for (uint64_t i = b->done > 16 ? b->done - 16 : 0; i < b->done; i++)
    if (b->hist[i % 16] != i)
      return printf("bad: history slot %llu\n", (unsigned long long)i), 1;
  struct node *n = b->recent;
  for (uint64_t i = b->done, d = 0; i-- > 0 && d < 4; d++, n = n->next)
    if (!n || n->v != i)
      return printf("bad: list node %llu\n", (unsigned long long)d), 1;
  if (n)
    return printf("bad: list longer than 4\n"), 1;
  if (pmkit_pool_check(pool))
    return printf("bad: heap: %s\n", pmkit_errormsg()), 1;
  if (want >= 0 && b->done != (uint64_t)want)
    return printf("bad: %llu transfers done, expected %ld\n",
                  (unsigned long long)b->done, want),
           1;
  printf("ok: %llu transfers\n", (unsigned long long)b->done);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "run") && strcmp(argv[1], "check"))) {
    fprintf(stderr, "usage: bank run POOL N | bank check POOL [N]\n");
    return 2;
  }
  int r = pmkit_pool_open(argv[2], NULL, &pool);
  if (r == PMKIT_E_NOENT && !strcmp(argv[1], "run"))
    r = pmkit_pool_create(argv[2], 8u << 20, NULL, &pool);
  if (r) {
    fprintf(stderr, "bank: %s: %s\n", argv[2], pmkit_errormsg());
    return 2;
  }
  struct bank *b;
  if (pmkit_root(pool, sizeof *b, (void **)&b) || pmkit_recover(pool) < 0) {
    fprintf(stderr, "bank: %s\n", pmkit_errormsg());
    return 1;
  }
  long n = argc > 3 ? atol(argv[3]) : -1;
  if (!strcmp(argv[1], "check"))
    return verify(b, n);
  for (uint64_t i = b->done; i < (uint64_t)n; i++)
    transfer(b, i);
  return pmkit_pool_close(pool) ? 1 : 0;
}
