// SPDX-License-Identifier: Apache-2.0
// pmalloc.h -- the allocator wrapper of the hash index (tests/cli/hashindex):
// defined in its own file, padding each block and aligning it to 64 bytes
// through integer arithmetic, as persistent indexes written elsewhere do.
#ifndef PMALLOC_H
#define PMALLOC_H
#include <pmkit/pmkit.h>
#include <stddef.h>

extern pmkit_pool *g_pool;
void *pm_alloc_aligned(size_t n);
#endif
