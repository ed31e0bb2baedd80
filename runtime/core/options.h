/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.h -- the runtime's environment variables (options.def), read and
 * checked once per process, on first use, by options.c.
 */
#ifndef PMKIT_CORE_OPTIONS_H
#define PMKIT_CORE_OPTIONS_H

#include <stdint.h>

#include "base.h"

enum pmk_opt {
#define PMK_OPTION(id, kind, dflt, values, onbad, help) PMK_OPT_##id,
#include "options.def"
#undef PMK_OPTION
  PMK_NOPTS
};

/* The option's value: its text ("" when it has none), and, for NUM, the
 * number; for CHOICE, the index of the value in its list (-1: none). */
PMK_HIDDEN const char *pmk_opt_text(enum pmk_opt o);
PMK_HIDDEN uint64_t pmk_opt_num(enum pmk_opt o);
PMK_HIDDEN int pmk_opt_choice(enum pmk_opt o);

#endif /* PMKIT_CORE_OPTIONS_H */
