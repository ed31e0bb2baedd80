/* SPDX-License-Identifier: Apache-2.0 */
/* unseen_fill.c -- code the trace pass never sees (see unseen.c). */
#include <string.h>

void fill_opaque(char *p, unsigned long n);
void fill_opaque(char *p, unsigned long n) { memset(p, 7, n); }
