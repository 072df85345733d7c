#!/usr/bin/env bash
# Where a training step's time goes, minidl beside its libtorch twin: one
# bench_train run of each with DNNL_VERBOSE=1, whose exec lines give each
# oneDNN primitive call's milliseconds. Prints per step: the step (from the
# run's samples/s), oneDNN's convolutions, its reorders (layout changes, e.g.
# NCHW <-> nChw8c), and the rest (minidl's or libtorch's own kernels, sgemm
# calls, the framework). Printing the log slows both runs a little.
#
#   bench/dnnl_split.sh [MODEL] [THREADS] [STEPS]      (default: resnet 1 6)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-resnet} threads=${2:-1} steps=${3:-6} warmup=2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
flags=(--model "$model" --threads "$threads" --steps "$steps" --warmup "$warmup")
echo "# $(date -u +%Y-%m-%dT%H:%M) $(getconf _NPROCESSORS_ONLN) CPUs, commit" \
     "$(git rev-parse --short HEAD), bench/dnnl_split.sh $model $threads $steps"
printf '%-9s %9s %12s %12s %9s\n' run step_ms conv_ms reorder_ms rest_ms
for run in minidl libtorch; do
  if [[ $run == minidl ]]; then
    DNNL_VERBOSE=1 build/bin/bench_train "${flags[@]}" --twin off > "$log"
  else
    DNNL_VERBOSE=1 OPENBLAS_NUM_THREADS=1 build/bin/bench_train_torch "${flags[@]}" > "$log"
  fi
  batch=$(sed -n 's/.* batch=\([0-9]*\).*/\1/p' "$log" | head -n 1)
  rate=$(sed -nE 's#^(samples|sequences)/s=##p' "$log" | head -n 1)
  # Every step makes the same calls, the warm-up steps too (their first calls
  # are slower): the timed steps' calls are the last steps / (steps + warmup).
  # (grep finds none for a model without convolutions)
  { grep -E '^onednn_verbose,exec,[^,]*,(convolution|reorder),' "$log" || true; } |
    awk -F, -v run="$run" -v steps="$steps" -v all=$((steps + warmup)) -v batch="$batch" \
        -v rate="$rate" '
      { kind[NR] = $4; ms[NR] = $NF }
      END {
        for (i = NR - int(NR * steps / all) + 1; i <= NR; ++i)
          if (kind[i] == "convolution") conv += ms[i]; else re += ms[i]
        step = batch / rate * 1e3
        printf "%-9s %9.1f %12.1f %12.1f %9.1f\n", run, step, conv / steps, re / steps,
               step - (conv + re) / steps
      }'
done
