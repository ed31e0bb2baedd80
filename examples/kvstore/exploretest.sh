#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# exploretest.sh BUILD_DIR PYTHON -- explores the crash images of the KV
# store under volatile caches (pmkit explore, model x86): the store as
# written must have none that fail its --check; with one flush removed
# (kvstore-noflush-traced) some must fail, and the same build must pass
# under eADR, where a missing flush is harmless. Exit 0 if all three hold.
set -u
B=$1
PY=$2
K=$B/examples/kvstore
D=$(mktemp -d /dev/shm/pmkit-kv-explore.XXXXXX) || exit 2
trap 'rm -rf "$D"' EXIT
OPS="--ops 40 --seed 3 --keys 12 --quiet"
BUDGET=2000
fail=0

explore() { # NAME MODEL BINARY EXPECTED-STATUS
  "$K/kvstore" create "$D/$1.pool" --size 2 >/dev/null || exit 2
  "$PY" -m pmkit explore --model "$2" --jobs 2 --no-progress --budget $BUDGET \
    --save-dir "$D/$1-failures" --json "$D/$1.json" \
    --check "$K/kvstore --check {pool}" -- "$K/$3" run "$D/$1.pool" $OPS \
    >"$D/$1.out" 2>&1
  got=$?
  if [ "$got" -ne "$4" ]; then
    echo "FAIL: $3 under $2: exit $got, expected $4"
    cat "$D/$1.out"
    fail=1
  else
    echo "ok: $3 under $2: exit $got ($(grep 'images:' "$D/$1.out" | sed 's/^ *//'))"
  fi
}

explore fixed x86 kvstore-traced 0
explore noflush x86 kvstore-noflush-traced 1
explore noflush-eadr eadr kvstore-noflush-traced 0
# The failure must name the store whose flush was removed (a node write in
# kv_put) as lost.
if ! grep -q "kvstore.c" "$D/noflush.out"; then
  echo "FAIL: the counterexample does not point into kvstore.c"
  fail=1
fi
exit $fail
