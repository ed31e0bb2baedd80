# SPDX-License-Identifier: Apache-2.0
# pmkit_trace_target(<target>): build <target> for `pmkit explore`. Its C/C++
# sources are compiled with the pmkit-trace pass (every PM store, flush and
# fence reports to the runtime) and it links libpmkit-trace, the traced build
# of libpmkit, instead of libpmkit. The target is rebuilt when the plugin
# changes. The same source built without this function records nothing.
# NO_LINK: only compile with the pass (the traced runtime's own objects).
function(pmkit_trace_target tgt)
  cmake_parse_arguments(arg "NO_LINK" "" "" ${ARGN})
  if(NOT PMKIT_BUILD_PASSES)
    message(FATAL_ERROR "pmkit_trace_target(${tgt}) needs PMKIT_BUILD_PASSES=ON")
  endif()
  set(plugin ${PMKIT_PLUGIN_FILE})
  target_compile_options(${tgt} PRIVATE
    -fpass-plugin=${plugin} -fplugin=${plugin}
    "SHELL:-mllvm -pmkit-trace" -g)
  if(NOT arg_NO_LINK)
    target_link_libraries(${tgt} PRIVATE pmkit-trace)
  endif()
  add_dependencies(${tgt} pmkit-passes)
  get_target_property(srcs ${tgt} SOURCES)
  set_source_files_properties(${srcs} TARGET_DIRECTORY ${tgt}
    PROPERTIES OBJECT_DEPENDS ${plugin})
endfunction()
