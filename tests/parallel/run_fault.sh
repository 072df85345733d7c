#!/bin/bash
# Runs a program that throws on rank 1 under mpirun and checks that the whole
# job ends non-zero within MAX_SECONDS (never a hang), reporting the time.
# usage: run_fault.sh MPIEXEC NP MAX_SECONDS PROGRAM [ARGS...]
mpiexec=$1 np=$2 max=$3
shift 3
start=$(date +%s.%N)
output=$(timeout 60 "$mpiexec" --oversubscribe -np "$np" "$@" 2>&1)
rc=$?
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "$output"
echo "run_fault: $np ranks: exit status $rc after ${elapsed} s (limit ${max} s)"
fail() { echo "run_fault: FAILED: $*"; exit 1; }
[ "$rc" -eq 124 ] && fail "the job hung (killed by timeout)"
[ "$rc" -eq 0 ] && fail "the job exited 0"
grep -q "rank 1: uncaught exception: rank 1 failed on purpose" <<<"$output" ||
  fail "no report of rank 1's exception"
grep -q "the collective returned" <<<"$output" && fail "a collective returned without rank 1"
awk -v e="$elapsed" -v m="$max" 'BEGIN { exit !(e < m) }' || fail "took ${elapsed} s"
echo "run_fault: ok"
