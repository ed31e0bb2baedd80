/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h -- everything runtime/core shares between its files, one
 * header per concept: base.h (visibility, errors), layout.h (the pool's
 * persistent layout), persist.h (write-backs, fences, crash points, trace
 * hooks), pool.h (pool and context handles, open pools), heap.h (the
 * allocator and per-thread state) and mode.h (what the mode runtimes get,
 * and their descriptors), arch.h (the CPU's table), options.h
 * (the environment variables, options.def). Everything has hidden
 * visibility (pmk_ prefix); the public surface is include/pmkit/pmkit.h. Mode
 * runtimes include mode.h only.
 */
#ifndef PMKIT_CORE_INTERNAL_H
#define PMKIT_CORE_INTERNAL_H

#include "arch.h"
#include "base.h"
#include "heap.h"
#include "layout.h"
#include "mode.h"
#include "options.h"
#include "persist.h"
#include "pool.h"

#endif /* PMKIT_CORE_INTERNAL_H */
