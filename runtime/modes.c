/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modes.c -- the table of mode descriptors the core dispatches through
 * (pmk_modes, runtime/core/mode.h), made from modes.def. It sits above the
 * core and the modes: the core names only the table, and linking the table
 * links every mode, so a static program's pmkit_recover never misses one.
 */
#include "core/mode.h"

#define PMK_MODE(name)                                                         \
  PMK_HIDDEN extern const struct pmk_mode pmk_##name##_mode;
#include "modes.def"
#undef PMK_MODE

const struct pmk_mode *const pmk_modes[] = {
#define PMK_MODE(name) &pmk_##name##_mode,
#include "modes.def"
#undef PMK_MODE
    NULL};
