#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# setup.sh -- make this checkout ready to build, test and demo, on a fresh
# Debian 12 machine or an already prepared one. Idempotent: installs only the
# Debian packages that are missing, creates the project venv (.venv) once and
# refreshes it when requirements change, then configures and builds with
# CMake + Ninja. Usage: scripts/setup.sh [--no-build | --configure-only]
set -euo pipefail
cd "$(dirname "$0")/.."

# lld-16: the linker of whole-program builds (LTO runs the pmkit passes).
# libclang-rt-16-dev: the sanitizer runtimes, and libFuzzer for clang-16's
# -fsanitize=fuzzer (the fuzz/ targets). dpkg-dev, autoconf, automake, libtool:
# unpacking and building Debian's source packages as Debian does (tests/real).
PKGS=(build-essential cmake ninja-build git pkg-config python3 python3-venv
      clang-16 llvm-16-dev llvm-16-tools libclang-rt-16-dev clang-format-16 lld-16
      libpmemobj-dev libpmem-dev musl-tools valgrind
      dpkg-dev autoconf automake libtool debian-archive-keyring zsh)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The venv uses Debian's python3 (3.11 on Debian 12) so that it does not
# depend on whatever other interpreter happens to be first on PATH.
PY=/usr/bin/python3
req=scripts/requirements.txt
stamp=.venv/.pmkit-requirements
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
if ! cmp -s "$req" "$stamp"; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r "$req"
  .venv/bin/python -m pip install -q --no-deps -e . >/dev/null
  cp "$req" "$stamp"
fi

[ "${1:-}" = "--no-build" ] && exit 0

if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 \
    -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
fi
[ "${1:-}" = "--configure-only" ] && exit 0
cmake --build build

# The pmkit command's front end (cli/launch.c) does `pmkit wpp run` and `kill`
# itself, on a program's restart path, and hands the rest to the Python
# command: it takes the place of the entry point pip made.
if [ -x build/pmkit-launch ] && [ "$(readlink .venv/bin/pmkit)" != "$PWD/build/pmkit-launch" ]; then
  ln -sf "$PWD/build/pmkit-launch" .venv/bin/pmkit
fi
