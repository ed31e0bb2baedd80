# SPDX-License-Identifier: Apache-2.0
# lit.cfg.py -- the lit suite of pmkit-passes.so: one folder per pass, each
# test a .ll (opt + FileCheck) or .c (clang with the plugin, often executed).
# Loaded by the lit.site.cfg.py that CMake writes into build/tests/passes, so
# run `.venv/bin/lit -v build/tests/passes`, not this folder.
# Substitutions: %opt (opt-16 with the plugin loaded), %clang_pm (clang-16
# with the plugin and pmkit's include dir), %clang_nopm (the same clang and
# include dir, no plugin), %FileCheck, %not, %{plugin} (the .so path),
# %link_trace / %link_pmkit (link flags for libpmkit-trace / libpmkit) and
# %explore (pmkit-explore).
# lit runs this file with `config` and `lit_config` already defined.
# ruff: noqa: F821

import os

import lit.formats

if not hasattr(config, "pmkit_plugin"):
    lit_config.fatal(
        "run lit on the build tree (e.g. lit build/tests/passes), "
        "whose lit.site.cfg.py CMake generates"
    )
if not os.path.exists(config.pmkit_plugin):
    lit_config.fatal(
        f"{config.pmkit_plugin} is not built yet: "
        "cmake --build <build dir> --target pmkit-passes"
    )

config.name = "pmkit-passes"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ll", ".c", ".cpp"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = config.pmkit_obj_dir

plugin = config.pmkit_plugin
# -fplugin loads the library early enough for -mllvm to see its options;
# -fpass-plugin is what adds its passes to the pipeline.
clang_pm = (
    f"{config.pmkit_clang} -fpass-plugin={plugin} -fplugin={plugin} "
    f"-I {config.pmkit_include_dir}"
)
config.substitutions.extend(
    [
        ("%clang_pm", clang_pm),
        ("%clang_nopm", f"{config.pmkit_clang} -I {config.pmkit_include_dir}"),
        ("%opt", f"{config.pmkit_opt} -load-pass-plugin={plugin}"),
        ("%FileCheck", config.pmkit_filecheck),
        ("%not", config.pmkit_not),
        ("%{plugin}", plugin),
        (
            "%link_trace",
            f"-L{config.pmkit_trace_libdir} -Wl,-rpath,{config.pmkit_trace_libdir} -lpmkit-trace",
        ),
        ("%link_pmkit", f"-L{config.pmkit_libdir} -Wl,-rpath,{config.pmkit_libdir} -lpmkit"),
        ("%explore", config.pmkit_explore),
    ]
)

# Plain `FileCheck` or `not` in a RUN line also gets LLVM 16's.
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.environment.get("PATH", "")]
)
