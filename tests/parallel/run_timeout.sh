#!/bin/bash
# Runs fault_timeout MODE under mpirun with MINIDL_TIMEOUT=TIMEOUT and checks
# that the job ends non-zero within MAX_SECONDS, after the timeout, and that
# every rank that reports names the call, its number and exactly the ranks that
# had not arrived, with what each was doing (see fault_timeout.cpp).
# TRANSPORT: shm (Open MPI's defaults) or tcp (--mca btl tcp,self, as
# across hosts): the ranks are asked over point-to-point messages either way.
# usage: run_timeout.sh MPIEXEC NP TIMEOUT MAX_SECONDS PROGRAM MODE TRANSPORT
mpiexec=$1 np=$2 timeout_s=$3 max=$4 program=$5 mode=$6 transport=${7:-shm}
case $transport in
  shm) options=() ;;
  tcp) options=(--mca btl tcp,self) ;;
  *) echo "run_timeout: unknown transport $transport"; exit 2 ;;
esac
stopped="did not answer within 1 s (stopped, or unreachable)"
case $mode in
  stopped) call=barrier missing="rank 1 had not arrived: rank 1 $stopped" ;;
  sleeping) call=barrier missing="rank 1 had not arrived: rank 1 is outside MPI (computing) after collective #2 (allreduce)" ;;
  other) call=allreduce missing="rank 1 had not arrived: rank 1 is in broadcast #3" ;;
  mixed) call=allreduce missing="ranks 1 and 3 had not arrived: rank 1 is in broadcast #3; rank 3 $stopped" ;;
  steps) call=allreduce missing="rank 1 had not arrived: rank 1 is in MPI_Finalize (its program has ended)" ;;
  startup) call="MPI start-up" ;;
  *) echo "run_timeout: unknown mode $mode"; exit 2 ;;
esac
start=$(date +%s.%N)
output=$(MINIDL_TIMEOUT=$timeout_s timeout -k 10 60 "$mpiexec" --oversubscribe -np "$np" "${options[@]}" \
         "$program" "$mode" 2>&1)
rc=$?
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "$output"
echo "run_timeout: $np ranks, $mode over $transport: exit status $rc after ${elapsed} s (MINIDL_TIMEOUT=$timeout_s, limit ${max} s)"
fail() { echo "run_timeout: FAILED: $*"; exit 1; }
{ [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && fail "the job hung (killed by timeout after 60 s, or 10 s later by SIGKILL)"
[ "$rc" -eq 0 ] && fail "the job exited 0"
if [ "$mode" = startup ]; then  # no collective yet: the start-up guard's line
  grep -Eq "^minidl: rank [0-9]+: MPI start-up \(MPI_Init_thread and the world's set-up\) has taken longer than MINIDL_TIMEOUT=$timeout_s s\. A rank is stopped or stuck" <<<"$output" ||
    fail "no rank reported the start-up that timed out"
  awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e >= t) }' || fail "ended before the timeout"
  awk -v e="$elapsed" -v m="$max" 'BEGIN { exit !(e < m) }' || fail "took ${elapsed} s"
  echo "run_timeout: ok"
  exit 0
fi
reports=$(grep "has waited" <<<"$output")
[ -n "$reports" ] || fail "no rank reported the $call that timed out"
expected="for the other ranks, longer than MINIDL_TIMEOUT=$timeout_s s. It is collective #3 on the world; $missing."
grep -qF "$expected" <<<"$(head -1 <<<"$reports")" || fail "the first report does not say '$expected'"
while read -r line; do
  grep -Eq "^minidl: rank [0-9]+: $call \([0-9]+ bytes\) has waited [0-9.]+ s " <<<"$line" ||
    fail "a report does not name the $call: $line"
  # A later report may come after mpirun's teardown resumed a stopped rank,
  # which may then read as running, or have arrived: it names the ranks
  # missing at that moment, or says that none was (the first report's rank
  # has left, so the collective can still not complete).
  grep -Eq "It is collective #3 on the world; (ranks? [0-9, and]+ had not arrived: |every other rank had arrived: )" <<<"$line" ||
    fail "a report does not name the ranks that had not arrived: $line"
done <<<"$reports"
grep -q "returned, which they must not" <<<"$output" && fail "a collective returned"
awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e >= t) }' || fail "ended before the timeout"
awk -v e="$elapsed" -v m="$max" 'BEGIN { exit !(e < m) }' || fail "took ${elapsed} s"
echo "run_timeout: ok ($(wc -l <<<"$reports") report(s))"
