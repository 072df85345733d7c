#!/usr/bin/env bash
# Data-parallel scaling of LeNet-5 training on this machine: 1 rank x 1 thread
# against 2 and 4 ranks x 1 thread, with DataParallel's automatic
# (overlapped) and explicit styles (the two in one job, taking turns chunk by
# chunk), all in one run, repeated; prints the median samples/s of each and
# the ratios, and draws them as an SVG bar chart (default
# /tmp/minidl-scaling.svg; docs/scaling.svg is one such drawing) whose foot
# says when, where and how it was measured.
#
#   bench/scaling.sh [REPEATS] [STEPS] [SVG]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
steps=${2:-300}
svg=${3:-/tmp/minidl-scaling.svg}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
declare -A all
for ((r = 0; r < repeats; ++r)); do  # interleaved, so load drifts hit every case
  all[1]+="$(build/bin/bench_train --steps "$steps" --threads 1 --twin off |
    sed -n 's/^samples\/s=//p') "
  for n in 2 4; do  # both styles in one job, taking turns chunk by chunk (--parallel both)
    out=$(mpirun --oversubscribe -np $n build/bin/bench_train --steps "$steps" --threads 1 --parallel both)
    all[auto$n]+="$(sed -n 's/^samples\/s_auto=//p' <<<"$out") "
    all[explicit$n]+="$(sed -n 's/^samples\/s_explicit=//p' <<<"$out") "
    all[ratio$n]+="$(sed -n 's/^auto\/explicit=//p' <<<"$out") "
  done
done
median() { printf '%s\n' $1 | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
one=$(median "${all[1]}")
echo "load: $(cut -d' ' -f1 /proc/loadavg) on $(getconf _NPROCESSORS_ONLN) cores"
echo "1 rank  x 1 thread:            $one samples/s"
bars=("1 rank=$one")
for n in 2 4; do
  auto=$(median "${all[auto$n]}") expl=$(median "${all[explicit$n]}")
  echo "$n ranks x 1 thread, automatic: $auto samples/s ($(awk "BEGIN{printf \"%.2f\", $auto/$one}")x)"
  echo "$n ranks x 1 thread, explicit:  $expl samples/s ($(awk "BEGIN{printf \"%.2f\", $expl/$one}")x)"
  echo "$n ranks: automatic / explicit, per job: median $(median "${all[ratio$n]}") (${all[ratio$n]% })"
  bars+=("$n ranks, automatic=$auto" "$n ranks, explicit=$expl")
done
foot="$(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1)), bench/scaling.sh $repeats $steps"
/usr/bin/python3 - "$foot" "${bars[@]}" > "$svg" <<'PY'
import sys
from xml.sax.saxutils import escape
foot, bars = sys.argv[1], [(b.rsplit("=", 1)[0], float(b.rsplit("=", 1)[1])) for b in sys.argv[2:]]
one, top = bars[0][1], max(v for _, v in bars) * 1.15
width = 60 + 130 * len(bars)
print(f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='320' font-family='sans-serif' font-size='12'>")
print("<rect width='100%' height='100%' fill='white'/>")
print(f"<text x='{width / 2}' y='24' text-anchor='middle' font-size='15'>LeNet-5 training, batch 64 per rank, 1 thread per rank</text>")
for i, (name, v) in enumerate(bars):
    h, x = 200 * v / top, 40 + i * 130
    print(f"<rect x='{x}' y='{250 - h:.1f}' width='100' height='{h:.1f}' fill='#1f77b4'/>")
    print(f"<text x='{x + 50}' y='{244 - h:.1f}' text-anchor='middle'>{v:.0f} ({v / one:.2f}x)</text>")
    print(f"<text x='{x + 50}' y='270' text-anchor='middle'>{escape(name)}</text>")
print(f"<text x='{width / 2}' y='292' text-anchor='middle' fill='#555'>samples/s (all ranks), medians of interleaved runs</text>")
print(f"<text x='{width / 2}' y='310' text-anchor='middle' fill='#555' font-size='10'>{escape(foot)}</text>")
print("</svg>")
PY
echo "wrote $svg"
