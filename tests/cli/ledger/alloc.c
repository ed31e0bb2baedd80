/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>

#include "ledger.h"

/* A wrapper in another file than its callers, padding the block and
 * aligning it through integer arithmetic. */
void *ledger_alloc(pmkit_pool *pool, unsigned long size) {
  void *block;
  if (pmkit_zalloc(pool, size + 64, &block))
    return 0;
  return (void *)(((uintptr_t)block + 63) & ~(uintptr_t)63);
}
