// SPDX-License-Identifier: Apache-2.0
#include "pmalloc.h"

#include <stdint.h>

pmkit_pool *g_pool;

void *pm_alloc_aligned(size_t n) {
  void *p;
  if (pmkit_alloc(g_pool, n + 64, &p))
    return nullptr;
  return reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(p) + 63) &
                                  ~static_cast<uintptr_t>(63));
}
