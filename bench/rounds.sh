#!/usr/bin/env bash
# bench_train over models and thread settings in interleaved rounds, each run
# with its libtorch twin; prints the medians. With LOAD > 0 every run trains
# beside LOAD busy processes that bench_train starts and stops itself
# (--load), the twin too.
#
#   bench/rounds.sh [ROUNDS] [LOAD] [THREADS...]      (default: 5 0 1 2)
#   MODELS="lenet resnet" bench/rounds.sh 5 2 auto 1  (default: the zoo's six)
#   MODELS="vgg mobilenet unet encoder gru" bench/rounds.sh 5 0 1 2  (a user's)
#
# One line per model and setting: minidl's and libtorch's median rates, the
# median of the runs' ratios (each run's minidl / its own twin) with their
# range, both peak RSS medians, the share of the sgemm ceiling (bench_train's
# 2048^3 sgemm on the same threads) that minidl's step reaches and the share
# that 1.5x libtorch's rate would need, and minidl's thread count at the end
# of each run (`auto` follows the load). LeNet and the MLP run 1000 steps
# after 100 warm-up, so that an `auto` run's first looks at the load (0.2 s
# apart) fall in its warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
load=${2:-0}
shift $(($# < 2 ? $# : 2))
settings=("$@")
((${#settings[@]})) || settings=(1 2)
models=(${MODELS:-lenet mlp resnet dcgan char_lstm tiny_gpt})
declare -A ours theirs ratio rss trss share need ends
value() { sed -n "s|^$1=||p" <<<"$2" | head -n 1; }
for ((r = 1; r <= rounds; ++r)); do  # interleaved, so drifts in load hit every case
  echo "# round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)" >&2
  for m in "${models[@]}"; do
    extra=()
    [[ $m == lenet || $m == mlp ]] && extra=(--steps 1000 --warmup 100)
    for t in "${settings[@]}"; do
      out=$(build/bin/bench_train --model "$m" --threads "$t" --load "$load" "${extra[@]}")
      unit=$(grep -m1 -o '^[a-z]*/s' <<<"$out")  # samples/s or sequences/s
      a=$(value "$unit" "$out") b=$(value "libtorch_$unit" "$out")
      k="$m $t"
      ours[$k]+="$a " theirs[$k]+="$b " ends[$k]+="$(value threads_end "$out") "
      ratio[$k]+="$(awk "BEGIN{printf \"%.3f\", $a/$b}") "
      rss[$k]+="$(value peak_rss_mb "$out") " trss[$k]+="$(value libtorch_peak_rss_mb "$out") "
      ceiling=$(value sgemm_ceiling_gflops "$out")
      share[$k]+="$(value ceiling_share "$out") "
      need[$k]+="$(awk "BEGIN{printf \"%.3f\", 1.5 * $(value libtorch_gflops "$out") / $ceiling}") "
    done
  done
done
source bench/stats.sh
echo "# $(date -u +%Y-%m-%d) $(getconf _NPROCESSORS_ONLN) CPUs, commit $(git rev-parse --short HEAD)," \
     "bench/rounds.sh $rounds $load ${settings[*]}, load average now $(cut -d' ' -f1 /proc/loadavg)"
row='%-10s %-7s %12s %12s %7s %13s %9s %9s %6s %6s  %s\n'
printf "$row" model threads minidl libtorch ratio "ratio range" rss_MB torch_MB share 1.5x \
  threads_end
for m in "${models[@]}"; do
  for t in "${settings[@]}"; do
    k="$m $t"
    printf "$row" "$m" "$t" "$(median "${ours[$k]}")" \
      "$(median "${theirs[$k]}")" "$(median "${ratio[$k]}")" "$(range "${ratio[$k]}")" \
      "$(median "${rss[$k]}")" "$(median "${trss[$k]}")" "$(median "${share[$k]}")" \
      "$(median "${need[$k]}")" "${ends[$k]% }"
  done
done
