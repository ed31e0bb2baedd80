// SPDX-License-Identifier: Apache-2.0
// main.cpp -- `hashindex run POOL`: build the index and insert 40 keys;
// `hashindex check POOL`: exit 0 if what a crash left is consistent.
#include <string.h>

#include "index.h"

struct Root {
  Index *idx;
};

int main(int argc, char **argv) {
  Root *root;
  if (argc < 3)
    return 2;
  bool run = !strcmp(argv[1], "run");
  if ((run ? pmkit_pool_create(argv[2], 8 << 20, nullptr, &g_pool)
           : pmkit_pool_open(argv[2], nullptr, &g_pool)) ||
      pmkit_root(g_pool, sizeof *root, reinterpret_cast<void **>(&root)))
    return 2;
  if (run) {
    Index *idx = new Index(8);
    root->idx = idx;
    pmkit_persist(&root->idx, sizeof root->idx);
    for (long k = 0; k < 40; k++)
      idx->insert(k);
  }
  bool bad = !run && root->idx && !root->idx->check();
  pmkit_pool_close(g_pool);
  return bad;
}
