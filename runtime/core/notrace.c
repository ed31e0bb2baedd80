/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notrace.c -- the tracing entry points of plain libpmkit, which records
 * nothing: marks cost a call and return. libpmkit-trace replaces this file
 * with runtime/trace/trace.c.
 */
#include "internal.h"

void pmkit_mark_begin(const char *name) { (void)name; }
void pmkit_mark_end(const char *name) { (void)name; }
int pmkit_tracing(void) { return 0; }
