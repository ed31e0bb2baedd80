/* SPDX-License-Identifier: Apache-2.0 */
/*
 * flit.c -- the FliT counters of robust mode's `flit` setting (abi.h): one
 * 64-bit counter per hashed cache line, in DRAM, shared by every thread of
 * the process. The pmkit-robust pass inlines all uses (a locked add before
 * and after each atomic PM write, a load after each atomic PM load), so the
 * runtime only provides the table, zeroed at load: no write is in flight
 * when a process starts, which is also true after a crash.
 */
#include "../core/mode.h"
#include "pmkit/abi.h"

uint64_t __pmkit_flit_counters[PMKIT_FLIT_COUNTERS]
    __attribute__((aligned(64)));

/* Nothing to recover: the counters are in DRAM. */
PMK_HIDDEN const struct pmk_mode pmk_flit_mode = {"flit", 0, NULL};
