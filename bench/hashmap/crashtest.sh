#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# crashtest.sh -- crash campaign for bench_hashmap: after every crash,
# `bench_hashmap --check` must report the pool consistent. Three kinds of
# crash, all on pools in /dev/shm (a killed process leaves its stores in the
# page cache, as an eADR platform would): (1) one thread, PMKIT_CRASH_AT=N
# at MAX_POINTS crash points spread over a small fixed-count run, each then
# resumed to the end and checked again (the exact content check); (2) two
# threads crashed at random points (PMKIT_CRASH_SEED) and resumed until
# they finish (the per-key validity check); (3) KILLS timed runs, 1 and 2
# threads, ended by SIGKILL at a random moment of the load or of the
# operations. Exits 0 only if every check passed.
# Usage: crashtest.sh BUILD_DIR   (env: MAX_POINTS=300, SEEDS=6, KILLS=6)
set -u

build=${1:?usage: crashtest.sh BUILD_DIR}
hm=$build/bench/hashmap/bench_hashmap
max_points=${MAX_POINTS:-300}
seeds=${SEEDS:-6}
kills=${KILLS:-6}
small=(--keys 200 --ops 500 --seed 3)
crash_exit=86

[[ -x $hm ]] || { echo "crashtest: $hm not built" >&2; exit 2; }
dir=$(mktemp -d /dev/shm/hashmap-crash.XXXXXX) || exit 2
trap 'rm -rf "$dir"' EXIT
pool=$dir/hm.pool
unset PMKIT_CRASH_AT PMKIT_CRASH_SEED PMKIT_CRASH_EVERY PMKIT_CRASH_REPORT

failures=0
fail() {
  ((failures++ < 10)) && echo "  FAIL: $*"
}

start=$SECONDS
rm -f "$pool"
PMKIT_CRASH_REPORT=$dir/report "$hm" "${small[@]}" --pool "$pool" >/dev/null ||
  exit 2
points=$(<"$dir/report")
echo "bench_hashmap ${small[*]}: $points crash points" \
  "(domain ${PMKIT_DOMAIN:-adr})"

# (1) Evenly spread crash points, first and last included.
tried=0
for ((i = 0; i < max_points; i++)); do
  n=$((1 + i * (points - 1) / (max_points - 1)))
  rm -f "$pool"
  PMKIT_CRASH_AT=$n "$hm" "${small[@]}" --pool "$pool" >/dev/null 2>&1
  st=$?
  ((tried++))
  ((st == crash_exit)) || { fail "crash at $n: run exited $st"; continue; }
  out=$("$hm" --check "$pool") || { fail "crash at $n: $out"; continue; }
  out=$("$hm" "${small[@]}" --pool "$pool" >/dev/null && "$hm" --check "$pool")
  [[ $? == 0 && $out == *"ops_done=500" ]] ||
    fail "resume after crash at $n: $out"
done
echo "  PMKIT_CRASH_AT: $tried points, $failures failures"

# (2) Two threads, random crash points, resumed until the run finishes.
crashes=0
for ((s = 1; s <= seeds; s++)); do
  rm -f "$pool"
  for ((attempt = 0; attempt < 40; attempt++)); do
    PMKIT_CRASH_SEED=$((s * 100 + attempt)) PMKIT_CRASH_EVERY=$((points / 2)) \
      "$hm" --threads 2 "${small[@]}" --pool "$pool" >/dev/null 2>&1
    st=$?
    out=$("$hm" --check "$pool") || fail "seed $s, attempt $attempt: $out"
    ((st == 0)) && break
    ((st == crash_exit)) || { fail "seed $s: run exited $st"; break; }
    ((crashes++))
  done
  [[ $out == *"ops_done=250,250" ]] || fail "seed $s did not finish: $out"
done
echo "  PMKIT_CRASH_SEED: $seeds pools, 2 threads, $crashes crashes;" \
  "$failures failures in total"

# (3) SIGKILL 0-0.3 s into a timed run (the 100000 keys load in ~0.1 s).
for ((k = 0; k < kills; k++)); do
  rm -f "$pool"
  "$hm" --threads $((1 + k % 2)) --keys 100000 --seconds 5 --warmup 0 \
    --seed "$k" --pool "$pool" >/dev/null 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  if [[ ! -e $pool ]]; then # killed before the pool was complete
    echo "  kill $k: before the pool existed"
    continue
  fi
  out=$("$hm" --check "$pool") || fail "kill $k: $out"
  echo "  kill $k ($((1 + k % 2)) thread(s)): $out"
done

echo "summary: $failures failures; $((SECONDS - start)) s"
((failures == 0))
