#!/bin/bash
# Runs fault_timeout under mpirun with MINIDL_TIMEOUT=TIMEOUT and checks that
# the job ends non-zero within MAX_SECONDS, a waiting rank naming the call.
# usage: run_timeout.sh MPIEXEC NP TIMEOUT MAX_SECONDS PROGRAM MODE CALL
mpiexec=$1 np=$2 timeout_s=$3 max=$4 program=$5 mode=$6 call=$7
start=$(date +%s.%N)
output=$(MINIDL_TIMEOUT=$timeout_s timeout 60 "$mpiexec" --oversubscribe -np "$np" "$program" "$mode" 2>&1)
rc=$?
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "$output"
echo "run_timeout: $np ranks, $mode: exit status $rc after ${elapsed} s (MINIDL_TIMEOUT=$timeout_s, limit ${max} s)"
fail() { echo "run_timeout: FAILED: $*"; exit 1; }
[ "$rc" -eq 124 ] && fail "the job hung (killed by timeout)"
[ "$rc" -eq 0 ] && fail "the job exited 0"
grep -Eq "minidl: rank [0-9]+: $call \([0-9]+ bytes\) has waited [0-9.]+ s for the other ranks, longer than MINIDL_TIMEOUT=$timeout_s s" <<<"$output" ||
  fail "no rank named the $call that timed out"
grep -q "returned, which they must not" <<<"$output" && fail "a collective returned"
awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e >= t) }' || fail "ended before the timeout"
awk -v e="$elapsed" -v m="$max" 'BEGIN { exit !(e < m) }' || fail "took ${elapsed} s"
echo "run_timeout: ok"
