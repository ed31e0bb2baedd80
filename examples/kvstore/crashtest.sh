#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# crashtest.sh -- crash campaign for the kvstore example. For each crash
# point N of `kvstore run POOL --ops 300 --seed 1 --keys 64` (all of them,
# or MAX_POINTS sampled evenly when there are more), on a fresh pool:
# PMKIT_CRASH_AT=N must end the run with status 86 (0 past the last point),
# `kvstore --check` must then report consistent, and resuming the run must
# finish it consistently. Then a few runs on one pool each, crashed at
# random points (PMKIT_CRASH_SEED) and resumed until they finish, checked
# after every crash. Then the same crash points with kvstore-buggy, where
# --check must say INCONSISTENT at least once. Exits 0 only if the correct
# build was always consistent and the buggy one was caught.
# Usage: crashtest.sh BUILD_DIR   (env: MAX_POINTS=300, SEEDS=10)
set -u

build=${1:?usage: crashtest.sh BUILD_DIR}
kv=$build/examples/kvstore/kvstore
kv_buggy=$build/examples/kvstore/kvstore-buggy
max_points=${MAX_POINTS:-300}
seeds=${SEEDS:-10}
workload=(--ops 300 --seed 1 --keys 64)
crash_exit=86

for b in "$kv" "$kv_buggy"; do
  [[ -x $b ]] || { echo "crashtest: $b not built" >&2; exit 2; }
done
dir=$(mktemp -d /dev/shm/kvstore-crash.XXXXXX) || exit 2
trap 'rm -rf "$dir"' EXIT
pool=$dir/kv.pool
# Crash points are counted per process, so the environment of the
# campaign's own commands must not arm them.
unset PMKIT_CRASH_AT PMKIT_CRASH_SEED PMKIT_CRASH_EVERY PMKIT_CRASH_REPORT

# Crash points of one uninterrupted run of the workload with binary $1.
count_points() {
  rm -f "$pool"
  "$1" create "$pool" --size 4 || exit 2
  PMKIT_CRASH_REPORT=$dir/report "$1" run "$pool" "${workload[@]}" --quiet ||
    exit 2
  cat "$dir/report"
}

# The crash points to try out of $1: all, or max_points spread evenly,
# always including the first and last, plus one past the end.
pick_points() {
  local n=$1 i
  if ((n <= max_points)); then
    seq 1 $((n + 1))
  else
    for ((i = 0; i < max_points; i++)); do
      echo $((1 + i * (n - 1) / (max_points - 1)))
    done
    echo $((n + 1))
  fi
}

failures=0
fail() {
  ((failures++ < 10)) && echo "  FAIL: $*"
}

# One crash at point $2 with binary $1, then --check; echoes the verdict
# line. Returns 0 consistent, 1 inconsistent, 2 wrong run exit status.
crash_and_check() {
  local bin=$1 n=$2 st last=$(($3 + 1))
  rm -f "$pool"
  "$bin" create "$pool" --size 4 || exit 2
  PMKIT_CRASH_AT=$n "$bin" run "$pool" "${workload[@]}" --quiet
  st=$?
  if ! ((st == crash_exit && n < last || st == 0 && n == last)); then
    echo "run exited $st"
    return 2
  fi
  "$bin" --check "$pool"
}

start=$SECONDS
points=$(count_points "$kv")
echo "kvstore: ${workload[*]}: $points crash points" \
  "(domain ${PMKIT_DOMAIN:-adr})"

tried=0
while read -r n; do
  ((tried++))
  out=$(crash_and_check "$kv" "$n" "$points")
  [[ $? == 0 ]] || { fail "crash at $n: $out"; continue; }
  # The crashed run must also be resumable to a consistent end.
  out=$("$kv" run "$pool" "${workload[@]}" && "$kv" --check "$pool")
  [[ $? == 0 && $out == *"ops_done=300"*consistent* ]] ||
    fail "resume after crash at $n: $out"
done < <(pick_points "$points")
echo "  PMKIT_CRASH_AT: $tried points tried, $failures failures"

# Random crashes, several per pool: crash, check, resume until finished.
crashes=0
for ((s = 1; s <= seeds; s++)); do
  rm -f "$pool"
  "$kv" create "$pool" --size 4 || exit 2
  for ((attempt = 0; attempt < 50; attempt++)); do
    PMKIT_CRASH_SEED=$((s * 1000 + attempt)) PMKIT_CRASH_EVERY=$((points / 3)) \
      "$kv" run "$pool" "${workload[@]}" --quiet
    st=$?
    out=$("$kv" --check "$pool") || fail "seed $s, attempt $attempt: $out"
    ((st == 0)) && break
    ((st == crash_exit)) || { fail "seed $s: run exited $st"; break; }
    ((crashes++))
  done
done
echo "  PMKIT_CRASH_SEED: $seeds pools, $crashes crashes, $failures failures" \
  "in total"

bpoints=$(count_points "$kv_buggy")
caught=0 btried=0 first=
while read -r n; do
  ((btried++))
  out=$(crash_and_check "$kv_buggy" "$n" "$bpoints")
  if [[ $out == INCONSISTENT* ]]; then
    ((caught++))
    [[ -n $first ]] || first="crash at $n: $out"
  fi
done < <(pick_points "$bpoints")
echo "kvstore-buggy: $bpoints crash points, $btried tried," \
  "$caught caught INCONSISTENT"
[[ -n $first ]] && echo "  first: $first"

echo "summary: correct build $failures failures; buggy build caught" \
  "$caught/$btried; $((SECONDS - start)) s"
((failures == 0 && caught > 0))
