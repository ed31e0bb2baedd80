// SPDX-License-Identifier: Apache-2.0
// A zeroed block published at once, in robust mode's base setting: the
// pass fences after the store of the pointer, not before it, so the zeros
// must already be durable when pmkit_zalloc returns. The block is reused
// (it held 0xab bytes), so a lost zeroing shows. Explored under x86-line
// (sampled: the pool's opening leaves many lines unfenced), no image has
// the pointer without the zeros. The control
// (-DFLUSH_ONLY: zeroed and written back but not fenced, what pmkit_zalloc
// did before) has such images.
//
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: %clang_pm -O1 -g -mllvm -pmkit-mode=robust -mllvm -pmkit-trace \
// RUN:   %s %link_trace -o %t.exe
// RUN: %t.exe setup %t.d/a.pool
// RUN: %explore --model x86-line --no-progress \
// RUN:   --save-dir %t.d/ok --check '%t.exe check {pool}' -- %t.exe run %t.d/a.pool \
// RUN:   | %FileCheck %s --check-prefix=OK
// OK: images: {{.*}}, 0 failed
// OK: result: {{ok|no failure}}
// RUN: %clang_pm -O1 -g -DFLUSH_ONLY -mllvm -pmkit-mode=robust -mllvm \
// RUN:   -pmkit-trace %s %link_trace -o %t.flush
// RUN: %t.flush setup %t.d/b.pool
// RUN: %not %explore --stop-after 1 --model x86-line --no-progress --save-dir %t.d/bad \
// RUN:   --check '%t.flush check {pool}' -- %t.flush run %t.d/b.pool \
// RUN:   | %FileCheck %s --check-prefix=BAD
// BAD: FAIL 1:
// BAD: checker: exit 1
// BAD: result: FAILED
#include <pmkit/annotations.h>
#include <pmkit/pmkit.h>
#include <string.h>

struct root {
  unsigned char *node;
  uint64_t old; // the block that held 0xab bytes
};

int main(int argc, char **argv) {
  pmkit_pool *p;
  struct root *r;
  if (argc != 3)
    return 2;
  if (!strcmp(argv[1], "setup")) { // a free block that held 0xab bytes
    unsigned char *a;
    if (pmkit_pool_create(argv[2], 2 << 20, NULL, &p) ||
        pmkit_root(p, sizeof *r, (void **)&r) ||
        pmkit_alloc(p, 64, (void **)&a))
      return 2;
    memset(a, 0xab, 64);
    pmkit_persist(a, 64);
    r->old = pmkit_off(p, a);
    pmkit_persist(&r->old, sizeof r->old);
    pmkit_free(p, a);
    return pmkit_pool_close(p);
  }
  if (pmkit_pool_open(argv[2], NULL, &p) ||
      pmkit_root(p, sizeof *r, (void **)&r))
    return 2;
  if (!strcmp(argv[1], "check")) {
    for (int i = 0; r->node && i < 64; i++)
      if (r->node[i] != 0)
        return 1;
    return 0;
  }
  unsigned char *b;
#ifdef FLUSH_ONLY
  if (pmkit_alloc(p, 64, (void **)&b))
    return 2;
  PMKIT_ROBUST_IGNORE_BEGIN;
  memset(b, 0, 64);
  pmkit_flush(b, 64);
  PMKIT_ROBUST_IGNORE_END;
#else
  if (pmkit_zalloc(p, 64, (void **)&b))
    return 2;
#endif
  if (pmkit_off(p, b) != r->old)
    return 3; // not the block that held 0xab: no test
  r->node = b;
  return pmkit_pool_close(p);
}
