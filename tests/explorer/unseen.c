/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unseen.c -- a pool written behind the tracer's back: fill_opaque (in
 * unseen_fill.c, compiled without the trace pass) sets 64 bytes of the root.
 * `pmkit explore` must warn that the pool at close differs from the traced
 * writes and name the call that could have written it.
 *
 *   unseen init POOL    create POOL (untraced run)
 *   unseen run POOL     open it and let the uninstrumented code write
 */
#include <string.h>

#include "pmkit/pmkit.h"

void fill_opaque(char *p, unsigned long n);

int main(int argc, char **argv) {
  pmkit_pool_opts o = {.layout = "unseen"};
  pmkit_pool *pool;
  void *root;
  if (argc == 3 && !strcmp(argv[1], "init")) {
    if (pmkit_pool_create(argv[2], 4u << 20, &o, &pool) ||
        pmkit_root(pool, 256, &root))
      return 2;
    return pmkit_pool_close(pool) ? 2 : 0;
  }
  if (argc != 3 || strcmp(argv[1], "run") ||
      pmkit_pool_open(argv[2], &o, &pool) || pmkit_root(pool, 256, &root))
    return 2;
  fill_opaque(root, 64);
  pmkit_persist(root, 64);
  return pmkit_pool_close(pool) ? 2 : 0;
}
