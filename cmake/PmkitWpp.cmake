# SPDX-License-Identifier: Apache-2.0
# pmkit_wpp_executable(<target> OUTPUT <file> SOURCES <src>... [FLAGS <flag>...])
# Builds <file> as `pmkit wpp cc` would: musl-gcc -static with
# libpmkit-wpp.a and its --wrap options (runtime/wpp). The target depends on
# the runtime, so a change to it relinks. Available when musl-gcc was found
# (PMKIT_WPP_LIB set by runtime/wpp).
function(pmkit_wpp_executable target)
  cmake_parse_arguments(W "" "OUTPUT" "SOURCES;FLAGS" ${ARGN})
  if(NOT PMKIT_WPP_LIB)
    return()
  endif()
  add_custom_command(OUTPUT ${W_OUTPUT}
    COMMAND ${PMKIT_MUSL_GCC} -O2 ${W_FLAGS} ${W_SOURCES} ${PMKIT_WPP_LIB}
            @${PMKIT_WPP_OPTS} -o ${W_OUTPUT}
    DEPENDS ${W_SOURCES} pmkit-wpp ${PMKIT_WPP_LIB}
    COMMENT "pmkit wpp cc ${target}" VERBATIM)
  add_custom_target(${target} ALL DEPENDS ${W_OUTPUT})
endfunction()
