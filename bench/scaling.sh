#!/usr/bin/env bash
# Data-parallel scaling of LeNet-5 training on this machine: 1 rank x 1 thread
# against 2 ranks x 1 thread, with DataParallel's automatic (overlapped) and
# explicit styles, all in one run, repeated; prints the median samples/s of
# each and the ratios, and draws docs/scaling.svg.
#
#   bench/scaling.sh [REPEATS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
steps=${2:-300}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
run() {  # ranks mode -> samples/s
  if [[ $1 == 1 ]]; then
    build/bin/bench_train --steps "$steps" --threads 1 --twin off | sed -n 's/^samples\/s=//p'
  else
    mpirun --oversubscribe -np "$1" build/bin/bench_train --steps "$steps" --threads 1 --parallel "$2" |
      sed -n 's/^samples\/s=//p'
  fi
}
declare -A all
for ((r = 0; r < repeats; ++r)); do  # interleaved, so load drifts hit every case
  for c in "1 none" "2 auto" "2 explicit"; do
    all[$c]+="$(run $c) "
  done
done
median() { printf '%s\n' $1 | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
one=$(median "${all[1 none]}"); auto=$(median "${all[2 auto]}"); expl=$(median "${all[2 explicit]}")
echo "load: $(cut -d' ' -f1 /proc/loadavg)"
echo "1 rank  x 1 thread:            $one samples/s"
echo "2 ranks x 1 thread, automatic: $auto samples/s ($(awk "BEGIN{printf \"%.2f\", $auto/$one}")x)"
echo "2 ranks x 1 thread, explicit:  $expl samples/s ($(awk "BEGIN{printf \"%.2f\", $expl/$one}")x)"
/usr/bin/python3 - "$one" "$auto" "$expl" > docs/scaling.svg <<'PY'
import sys
one, auto, expl = map(float, sys.argv[1:])
bars = [("1 rank", one), ("2 ranks, automatic", auto), ("2 ranks, explicit", expl)]
top = max(v for _, v in bars) * 1.15
print("<svg xmlns='http://www.w3.org/2000/svg' width='520' height='300' font-family='sans-serif' font-size='13'>")
print("<rect width='100%' height='100%' fill='white'/>")
print("<text x='260' y='24' text-anchor='middle' font-size='15'>LeNet-5 training, batch 64 per rank, 1 thread per rank</text>")
for i, (name, v) in enumerate(bars):
    h = 200 * v / top
    x = 60 + i * 150
    print(f"<rect x='{x}' y='{250 - h:.1f}' width='100' height='{h:.1f}' fill='#1f77b4'/>")
    print(f"<text x='{x + 50}' y='{244 - h:.1f}' text-anchor='middle'>{v:.0f} ({v / one:.2f}x)</text>")
    print(f"<text x='{x + 50}' y='270' text-anchor='middle'>{name}</text>")
print("<text x='260' y='292' text-anchor='middle' fill='#555'>samples/s (all ranks), medians of interleaved runs</text>")
print("</svg>")
PY
echo "wrote docs/scaling.svg"
