/* SPDX-License-Identifier: Apache-2.0 */
#include "opts.h"

struct root {
  struct rec r;
  long x;
  struct cnt c;
};

int main(int argc, char **argv) {
  pmkit_pool *p;
  struct root *root;
  if (argc < 2 || pmkit_pool_create(argv[1], 4 << 20, 0, &p) ||
      pmkit_root(p, sizeof *root, (void **)&root))
    return 2;
  set_packed(&root->r, 5);
  put(&root->x, 7);
  bump(&root->c, 2);
  tick(&root->c);
  pub(&root->x, 9);
  long *d = dram_alloc(sizeof *d);
  *d = argc;
  return pmkit_pool_close(p);
}
