#!/usr/bin/env bash
# bench_ops in interleaved rounds (each round: minidl, then its libtorch and
# oneDNN twins, as bench_ops runs them); prints each case's medians and the
# median of the rounds' minidl / best-peer ratios with their range.
#
#   bench/ops_rounds.sh [ROUNDS] [THREADS] [MIN_TIME]     (default: 5 1 0.2)
#   ONLY=res bench/ops_rounds.sh 5 1                       (bench_ops --only)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/stats.sh
rounds=${1:-5} threads=${2:-1} min_time=${3:-0.2}
declare -A ours torch dnnl ratio
cases=()
for ((r = 1; r <= rounds; ++r)); do
  echo "# round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >&2
  # the table's rows: case, minidl, libtorch, oneDNN ('-' where it has no such op), minidl/best
  while read -r name a b c q; do
    ((r > 1)) || cases+=("$name")
    ours[$name]+="$a " torch[$name]+="$b " dnnl[$name]+="$c " ratio[$name]+="$q "
  done < <(build/bin/bench_ops --threads "$threads" --min-time "$min_time" --only "${ONLY:-}" |
             awk '/^case /{t=1; next} t && NF >= 5 {print $1, $2, $3, $4, $5}')
done
echo "# $(date -u +%Y-%m-%d) $(getconf _NPROCESSORS_ONLN) CPUs, commit $(git rev-parse --short HEAD)," \
     "bench/ops_rounds.sh $rounds $threads $min_time, load average now $(cut -d' ' -f1 /proc/loadavg)"
printf '%-16s %10s %10s %10s %12s %12s\n' case minidl libtorch oneDNN minidl/best range
for n in "${cases[@]}"; do
  d=${dnnl[$n]}
  [[ $d == -* ]] && d=- || d=$(median "$d")
  printf '%-16s %10s %10s %10s %12s %12s\n' "$n" "$(median "${ours[$n]}")" \
    "$(median "${torch[$n]}")" "$d" "$(median "${ratio[$n]}")" "$(range "${ratio[$n]}")"
done
