/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cases_selftest.c -- the must-fail check of testutil.h's case runner:
 * the first case fails a CHECK, the second passes and sees that nothing of
 * the first ran after its failed CHECK. CTest's runtime.cases_must_fail
 * passes only on the output of a runner that ended the first case there and
 * went on: "FAIL fails_a_check", "ok passes_after" and the summary "2 cases:
 * 1 passed, 1 failed (fails_a_check)"; runtime.cases_must_fail.status only
 * if the program exits with a failure status.
 */
#include "testutil.h"

static int after_failure; /* set if the failed case went on */

static void fails_a_check(void) {
  CHECK(1 + 1 == 2);
  CHECK(1 + 1 == 3); /* fails: the case ends here */
  after_failure = 1;
}

static void passes_after(void) {
  CHECK(after_failure == 0);
  CHECK_OK(PMKIT_OK);
}

int main(void) {
  TEST_CASE(fails_a_check);
  TEST_CASE(passes_after);
  return test_summary();
}
