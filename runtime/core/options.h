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
 * number. A CHOICE is asked for by the name of a value: pmk_opt_is(o, v)
 * is 1 if the option is set to v (or v is its default and it is unset), 0
 * otherwise; a v that is not one of the option's values in options.def
 * stops the program (an internal error: the code and the table disagree),
 * so no caller depends on the order of the values. */
PMK_HIDDEN const char *pmk_opt_text(enum pmk_opt o);
PMK_HIDDEN uint64_t pmk_opt_num(enum pmk_opt o);
PMK_HIDDEN int pmk_opt_is(enum pmk_opt o, const char *v);

#endif /* PMKIT_CORE_OPTIONS_H */
