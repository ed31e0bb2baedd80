/* SPDX-License-Identifier: Apache-2.0 */
#include "ledger.h"

void ledger_put(struct ledger *l, long key, long val) {
  long n = l->count;
  if (n == LEDGER_CAP)
    return;
  l->keys[n] = key;
  l->vals[n] = val;
  l->count = n + 1;
  l->sum += val;
}

int ledger_check(const struct ledger *l, int atomic) {
  long sum = 0;
  if (l->count < 0 || l->count > LEDGER_CAP)
    return 1;
  for (long i = 0; i < l->count; i++) {
    if (l->keys[i] != i || l->vals[i] != 2 * i + 1)
      return 1;
    sum += l->vals[i];
  }
  return atomic && sum != l->sum;
}
