#!/bin/bash
# mnist_train_loop (the hand-written loop) on a tiny learnable set made here:
# 64 training and 16 test images whose label's row is bright. Four epochs
# without dropout must (1) learn: the last test loss below 0.75 x the first,
# and (2) give the same test losses on 2 ranks with 8 rows each (--batch is
# per rank) as on one rank with 16 rows (to 1e-5): DataParallel's mean gradient is the whole
# batch's. The loop's callbacks (CallbackList): (3) ModelCheckpoint saves
# each epoch's end, the last file byte for byte the weights --save writes;
# (4) LossMonitor prints step 25 of an epoch, and nothing in epochs of 4 steps.
# usage: check_train_loop.sh BIN_DIR MPIEXEC
set -eu
bin=$1 mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$(dirname "$0")/../tiny_mnist.py" "$tmp" 64 16 0 --learnable
args="--data $tmp --epochs 4 --dropout 0 --lr 0.05"
timeout 60 "$bin/mnist_train_loop" $args --batch 16 --checkpoint "$tmp/ck" --save "$tmp/final.safetensors" \
  | tee "$tmp/one"
for epoch in 1 2 3 4; do
  test -f "$tmp/ck-${epoch}_4.safetensors" || { echo "no checkpoint ck-${epoch}_4"; exit 1; }
done
cmp "$tmp/ck-4_4.safetensors" "$tmp/final.safetensors"
if grep -q "loss is" "$tmp/one"; then echo "LossMonitor printed before step 25"; exit 1; fi
timeout 60 "$bin/mnist_train_loop" --data "$tmp" --epochs 1 --batch 2 > "$tmp/log"
grep -x "epoch: 1 step: 25, loss is [0-9.e-]*" "$tmp/log" || { cat "$tmp/log"; exit 1; }
timeout 60 "$mpiexec" --oversubscribe -np 2 "$bin/mnist_train_loop" $args --batch 8 | tee "$tmp/two"
grep -qx "batch 8 per rank x 2 ranks = 16" "$tmp/two" || { echo "no batch line on 2 ranks"; exit 1; }
python3 - "$tmp/one" "$tmp/two" <<'PY'
import re, sys
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"test loss ([0-9.]+)", open(path).read())]
one, two = losses(sys.argv[1]), losses(sys.argv[2])
assert len(one) == 4 and len(two) == 4, f"expected 4 test lines each, got {one} and {two}"
assert one[-1] < 0.75 * one[0], f"did not learn: test loss {one[0]} -> {one[-1]}"
diff = max(abs(a - b) for a, b in zip(one, two))
print(f"test loss {one[0]} -> {one[-1]}; 1 rank vs 2 ranks: max difference {diff:.2e}")
assert diff <= 1e-5, f"1 rank {one} vs 2 ranks {two}"
PY
