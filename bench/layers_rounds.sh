#!/usr/bin/env bash
# bench_layers in interleaved rounds (each round: minidl, then its libtorch
# twin, as bench_layers runs them); prints each case's median milliseconds
# and the median of the rounds' libtorch / minidl ratios with their range.
#
#   bench/layers_rounds.sh [ROUNDS] [THREADS] [MIN_TIME]     (default: 5 1 0.2)
#   ONLY=soft bench/layers_rounds.sh 5 1                      (bench_layers --only)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/stats.sh
rounds=${1:-5} threads=${2:-1} min_time=${3:-0.2}
declare -A ours torch ratio
cases=()
for ((r = 1; r <= rounds; ++r)); do
  echo "# round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >&2
  # the table's rows: case, minidl ms, libtorch ms, libtorch / minidl
  while read -r name a b q; do
    ((r > 1)) || cases+=("$name")
    ours[$name]+="$a " torch[$name]+="$b " ratio[$name]+="$q "
  done < <(build/bin/bench_layers --threads "$threads" --min-time "$min_time" --only "${ONLY:-}" |
             awk '/^case /{t=1; next} t && NF >= 4 {print $1, $2, $3, $4}')
done
echo "# $(date -u +%Y-%m-%d) $(getconf _NPROCESSORS_ONLN) CPUs, commit $(git rev-parse --short HEAD)," \
     "bench/layers_rounds.sh $rounds $threads $min_time, load average now $(cut -d' ' -f1 /proc/loadavg)"
printf '%-16s %10s %12s %16s %12s\n' case "minidl ms" "libtorch ms" libtorch/minidl range
for n in "${cases[@]}"; do
  printf '%-16s %10s %12s %16s %12s\n' "$n" "$(median "${ours[$n]}")" "$(median "${torch[$n]}")" \
    "$(median "${ratio[$n]}")" "$(range "${ratio[$n]}")"
done
