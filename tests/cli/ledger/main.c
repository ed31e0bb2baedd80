/* SPDX-License-Identifier: Apache-2.0 */
/* main.c -- `ledger run POOL N`: N puts in a new pool; `ledger check POOL
 * [--atomic]`: recover, then exit 0 if the ledger is consistent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"

struct root {
  struct ledger *l;
};

int main(int argc, char **argv) {
  pmkit_pool *pool;
  struct root *root;
  if (argc >= 4 && !strcmp(argv[1], "run")) {
    if (pmkit_pool_create(argv[2], 4 << 20, 0, &pool) ||
        pmkit_root(pool, sizeof *root, (void **)&root))
      return 2;
    struct ledger *l = ledger_alloc(pool, sizeof *l);
    if (!l)
      return 2;
    root->l = l;
    pmkit_persist(&root->l, sizeof root->l);
    for (long i = 0, n = atol(argv[3]); i < n; i++)
      ledger_put(l, i, 2 * i + 1);
    printf("%ld entries\n", l->count);
    return pmkit_pool_close(pool);
  }
  if (argc >= 3 && !strcmp(argv[1], "check")) {
    if (pmkit_pool_open(argv[2], 0, &pool) || pmkit_recover(pool) < 0 ||
        pmkit_root(pool, sizeof *root, (void **)&root))
      return 2;
    int bad = root->l && ledger_check(root->l, argc > 3);
    pmkit_pool_close(pool);
    return bad;
  }
  fprintf(stderr, "usage: ledger run POOL N | ledger check POOL [--atomic]\n");
  return 2;
}
