#!/usr/bin/env bash
# Data-parallel scaling of LeNet-5 training on this machine: 1 rank x 1 thread
# against 2 ranks x 1 thread, with DataParallel's automatic (overlapped) and
# explicit styles (the two in one job, taking turns chunk by chunk), all in
# one run, repeated; prints the median samples/s of each and the ratios, and
# draws docs/scaling.svg.
#
#   bench/scaling.sh [REPEATS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
steps=${2:-300}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
declare -A all
for ((r = 0; r < repeats; ++r)); do  # interleaved, so load drifts hit every case
  all[one]+="$(build/bin/bench_train --steps "$steps" --threads 1 --twin off |
    sed -n 's/^samples\/s=//p') "
  # both styles in one job, taking turns chunk by chunk (bench_train --parallel both)
  out=$(mpirun --oversubscribe -np 2 build/bin/bench_train --steps "$steps" --threads 1 --parallel both)
  all[auto]+="$(sed -n 's/^samples\/s_auto=//p' <<<"$out") "
  all[explicit]+="$(sed -n 's/^samples\/s_explicit=//p' <<<"$out") "
  all[ratio]+="$(sed -n 's/^auto\/explicit=//p' <<<"$out") "
done
median() { printf '%s\n' $1 | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
one=$(median "${all[one]}"); auto=$(median "${all[auto]}"); expl=$(median "${all[explicit]}")
echo "load: $(cut -d' ' -f1 /proc/loadavg)"
echo "1 rank  x 1 thread:            $one samples/s"
echo "2 ranks x 1 thread, automatic: $auto samples/s ($(awk "BEGIN{printf \"%.2f\", $auto/$one}")x)"
echo "2 ranks x 1 thread, explicit:  $expl samples/s ($(awk "BEGIN{printf \"%.2f\", $expl/$one}")x)"
echo "automatic / explicit, per job: median $(median "${all[ratio]}") (${all[ratio]% })"
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
