# SPDX-License-Identifier: Apache-2.0
"""After `cmake --install`, a user's CMake project finds pmkit with find_package(pmkit) and links
pmkit::pmkit, and a plain Makefile user gets the flags from pkg-config."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_CMAKE = """cmake_minimum_required(VERSION 3.20)
project(user C)
find_package(pmkit 0.1 REQUIRED)
add_executable(user main.c)
target_link_libraries(user PRIVATE pmkit::pmkit)
"""

USER_MAIN = r"""#include <pmkit/pmkit.h>
#include <stdio.h>
int main(void) {
  printf("%s\n", pmkit_strerror(PMKIT_E_BUSY));
  return pmkit_in_pool(&main);
}
"""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not (ROOT / "build" / "build.ninja").exists():
        pytest.skip("no build tree")
    pre = tmp_path_factory.mktemp("prefix")
    subprocess.run(
        ["cmake", "--install", str(ROOT / "build"), "--prefix", str(pre)],
        check=True,
        capture_output=True,
    )
    return pre


def test_installed_layout(prefix):
    for rel in (
        "include/pmkit/pmkit.h",
        "include/pmkit/abi.h",
        "lib/cmake/pmkit/pmkitConfig.cmake",
        "lib/pkgconfig/pmkit.pc",
        "lib/libpmkit.a",
        "lib/pmkit/pmkit-passes.so",
    ):
        assert (prefix / rel).exists(), rel


def test_find_package(prefix, tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(USER_CMAKE)
    (tmp_path / "main.c").write_text(USER_MAIN)
    b = tmp_path / "b"
    subprocess.run(
        ["cmake", "-S", str(tmp_path), "-B", str(b), "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}"]
        + ["-DCMAKE_C_COMPILER=clang-16"],
        check=True,
        capture_output=True,
    )
    subprocess.run(["cmake", "--build", str(b)], check=True, capture_output=True)
    r = subprocess.run([str(b / "user")], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "PMKIT_E_BUSY\n"


@pytest.mark.skipif(not shutil.which("pkg-config"), reason="pkg-config not installed")
def test_pkg_config(prefix, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "pmkit"], env=env, capture_output=True, text=True
    ).stdout.split()
    incs = [Path(f[2:]).resolve() for f in flags if f.startswith("-I")]
    assert (prefix / "include").resolve() in incs and "-lpmkit" in flags
    (tmp_path / "main.c").write_text(USER_MAIN)
    exe = tmp_path / "user"
    subprocess.run(
        ["clang-16", str(tmp_path / "main.c"), "-o", str(exe), *flags, f"-Wl,-rpath,{prefix}/lib"],
        check=True,
    )
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout == "PMKIT_E_BUSY\n"
