/* SPDX-License-Identifier: Apache-2.0 */
/* opts.h -- a two-file program (libopts.a: lib.c; main.c) in which every
 * pmkit cc option of robust, clobber and ssapp mode has an effect the test
 * can see (tests/cli/test_build_shapes.py, test_every_option_in_every_shape):
 * a packed store (split unless -pmkit-robust-no-split), a flush of the
 * program's own (--strip-existing), atomics (--robust-setting=flit), a
 * DRAM allocator the test names a PM allocator (--pm-allocators), a FASE
 * that calls getpid (--clobber-allow, --ssapp-allow) and one that makes an
 * atomic increment (--ssapp-rmw-ints). */
#ifndef OPTS_H
#define OPTS_H
#include <pmkit/pmkit.h>

struct __attribute__((packed)) rec {
  int a;
  long v;
};
struct cnt {
  long n;
  long m;
};

void set_packed(struct rec *r, long v);
void put(long *p, long v);
void pub(long *p, long v);
void *dram_alloc(unsigned long n);
PMKIT_FASE void bump(struct cnt *c, long by);
PMKIT_FASE void tick(struct cnt *c);
#endif
