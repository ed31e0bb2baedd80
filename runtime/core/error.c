/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.c -- per-thread error messages. Every failing public function calls
 * pmk_err(code, fmt, ...) once, which records a one-line message for
 * pmkit_errormsg() and returns the code, so a failure reads
 * `return pmk_err(PMKIT_E_BUSY, "pool %s is already open", path);`.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static __thread char pmk_msg[512];
__thread unsigned char pmk_has_msg;

int pmk_err(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pmk_msg, sizeof pmk_msg, fmt, ap);
  va_end(ap);
  pmk_has_msg = 1;
  return code;
}

int pmk_err_wrap(int code, const char *pre, const char *sep, const char *post) {
  char was[sizeof pmk_msg];
  memcpy(was, pmk_has_msg ? pmk_msg : "", pmk_has_msg ? sizeof was : 1);
  return pmk_err(code, "%s%s%s%s", pre, sep, was, post);
}

const char *pmkit_errormsg(void) { return pmk_has_msg ? pmk_msg : ""; }

const char *pmkit_strerror(int err) {
  switch (err) {
  case PMKIT_OK:
    return "PMKIT_OK";
  case PMKIT_E_INVAL:
    return "PMKIT_E_INVAL";
  case PMKIT_E_NOENT:
    return "PMKIT_E_NOENT";
  case PMKIT_E_EXIST:
    return "PMKIT_E_EXIST";
  case PMKIT_E_TRUNCATED:
    return "PMKIT_E_TRUNCATED";
  case PMKIT_E_CORRUPT:
    return "PMKIT_E_CORRUPT";
  case PMKIT_E_FOREIGN:
    return "PMKIT_E_FOREIGN";
  case PMKIT_E_VERSION:
    return "PMKIT_E_VERSION";
  case PMKIT_E_TOOSMALL:
    return "PMKIT_E_TOOSMALL";
  case PMKIT_E_BUSY:
    return "PMKIT_E_BUSY";
  case PMKIT_E_ADDRINUSE:
    return "PMKIT_E_ADDRINUSE";
  case PMKIT_E_IO:
    return "PMKIT_E_IO";
  case PMKIT_E_NOMEM:
    return "PMKIT_E_NOMEM";
  case PMKIT_E_NOSPC:
    return "PMKIT_E_NOSPC";
  case PMKIT_E_STATE:
    return "PMKIT_E_STATE";
  default:
    return "PMKIT_E_UNKNOWN";
  }
}

int pmkit_errno(int err) {
  switch (err) {
  case PMKIT_E_INVAL:
  case PMKIT_E_FOREIGN:
  case PMKIT_E_TOOSMALL:
    return EINVAL;
  case PMKIT_E_NOENT:
    return ENOENT;
  case PMKIT_E_EXIST:
    return EEXIST;
  case PMKIT_E_TRUNCATED:
  case PMKIT_E_CORRUPT:
    return EUCLEAN;
  case PMKIT_E_VERSION:
    return ENOTSUP;
  case PMKIT_E_BUSY:
    return EBUSY;
  case PMKIT_E_ADDRINUSE:
    return EADDRINUSE;
  case PMKIT_E_IO:
    return EIO;
  case PMKIT_E_NOMEM:
    return ENOMEM;
  case PMKIT_E_NOSPC:
    return ENOSPC;
  case PMKIT_E_STATE:
    return EPERM;
  default:
    return err >= 0 ? 0 : EINVAL;
  }
}
