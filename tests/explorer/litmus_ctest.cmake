# SPDX-License-Identifier: Apache-2.0
# The explorer's CTest (tests/explorer/CMakeLists.txt): pmkit-explore on
# one litmus shape under one model, run without the pmkit command, and the
# set of outcomes its images produced compared with the exact set the model
# allows (tests/cli/test_litmus.py runs every shape and model through the
# command). Called with -D EXPLORE= LITMUS= CHECK= SHAPE= MODEL= WANT=
# (outcomes separated by ';') WORK= (a scratch folder).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(pool ${WORK}/litmus.pool)
set(out ${WORK}/outcomes.txt)
execute_process(COMMAND ${LITMUS} init ${pool} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "litmus init failed: ${rc}")
endif()
set(ENV{PMKIT_LITMUS_SHAPE} ${SHAPE})
set(ENV{PMKIT_LITMUS_OUT} ${out})
execute_process(
  COMMAND ${EXPLORE} --no-progress --model ${MODEL} --require-exhaustive
          --check-lib ${CHECK} -- ${LITMUS} run ${SHAPE} ${pool}
  RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 0 OR NOT log MATCHES "result: ok \\(exhaustive\\)")
  message(FATAL_ERROR "pmkit-explore exit ${rc}, not an exhaustive ok:\n${log}")
endif()
file(STRINGS ${out} got)
list(REMOVE_DUPLICATES got)
list(SORT got)
set(want ${WANT})
list(SORT want)
if(NOT got STREQUAL want)
  message(FATAL_ERROR
    "${SHAPE} under ${MODEL}: outcomes {${got}}, the model allows {${want}}")
endif()
message(STATUS "${SHAPE} under ${MODEL}: outcomes {${got}} as the model allows")
