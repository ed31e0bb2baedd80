/* SPDX-License-Identifier: Apache-2.0 */
#include <unistd.h>

#include "opts.h"

void set_packed(struct rec *r, long v) { r->v = v; }

void put(long *p, long v) {
  *p = v;
  pmkit_persist(p, sizeof *p);
}

void pub(long *p, long v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static char arena[4096];
static unsigned long used;

void *dram_alloc(unsigned long n) {
  void *b = arena + used;
  used += (n + 15) & ~15ul;
  return b;
}

void bump(struct cnt *c, long by) {
  c->n = c->n + by;
  c->m = getpid() & 1;
}

void tick(struct cnt *c) { __atomic_fetch_add(&c->m, 1, __ATOMIC_SEQ_CST); }
