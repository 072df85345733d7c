#!/bin/bash
# Exact resume through the example program: a run with --save-every, and the
# same run resumed from one of its mid-epoch checkpoints, print the same losses
# from there on and save the same final weights, byte for byte: SGD, Momentum
# and Adam on one rank, Adam on 2 ranks under mpirun, and with random shifts
# (--augment, drawn per image and epoch) on 1 and 2 ranks. A tiny IDX set is
# made here.
# usage: check_resume.sh BIN_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}

# 96 training images (12 steps of 8 per epoch on one rank), 16 test images.
python3 "$(dirname "$0")/../tiny_mnist.py" "$tmp/data" 96 16 1

# check NAME OPTIMIZER FROM LAST RANKS: runs lenet_mnist straight and resumed
# from checkpoint FROM (one the straight run wrote), alone or data-parallel
# on RANKS ranks under mpirun, and compares their losses, final weights and
# last checkpoints (LAST).
check() {
  local name=$1 opt=$2 from=a-$3.safetensors last=$4 ranks=$5 extra=("${@:6}")
  local dir="$tmp/$name"
  mkdir "$dir"
  local run=("$bin/lenet_mnist")
  [ "$ranks" -gt 1 ] && run=("$mpiexec" --oversubscribe -np "$ranks" "$bin/lenet_mnist" --parallel data)
  run+=(--data "$tmp/data" --epochs 2 --batch 8 --log-every 1 --threads 1 --optimizer "$opt"
        --save-every 5 "${extra[@]}")
  timeout 120 "${run[@]}" --save "$dir/a.safetensors" >"$dir/straight.txt" 2>&1 ||
    { fail "$name: the straight run: $(tail -3 "$dir/straight.txt")"; return; }
  [ -f "$dir/$from" ] || { fail "$name: no checkpoint $from (have: $(ls "$dir"))"; return; }
  timeout 120 "${run[@]}" --save "$dir/b.safetensors" --resume "$dir/$from" >"$dir/resumed.txt" 2>&1 ||
    { fail "$name: the resumed run: $(tail -3 "$dir/resumed.txt")"; return; }
  grep -q "^resumed from $dir/$from" "$dir/resumed.txt" || fail "$name: no 'resumed from' line"
  local n
  n=$(grep -c "loss is" "$dir/resumed.txt")
  [ "$n" -gt 0 ] &&
    diff <(grep "loss is" "$dir/straight.txt" | tail -n "$n") <(grep "loss is" "$dir/resumed.txt") >/dev/null ||
    fail "$name: the resumed run's $n losses differ from the straight run's last ones"
  cmp -s "$dir/a.safetensors" "$dir/b.safetensors" || fail "$name: the final weights differ"
  cmp -s "$dir/a-$last.safetensors" "$dir/b-$last.safetensors" ||
    fail "$name: the last checkpoints a-$last and b-$last differ"
  echo "ok: $name: resumed from $from, $n steps with the same losses, the same bytes"
}

# One rank: 12 steps per epoch, --save-every 5 writes 1_5, 1_10, 1_12, 2_3, 2_8, 2_12.
for opt in sgd momentum adam; do
  check "$opt" "$opt" 1_10 2_12 1
done
check adam_at_epoch_end adam 1_12 2_12 1
check momentum_augment momentum 2_3 2_12 1 --augment shift:2
# 2 ranks: 6 steps per epoch, checkpoints 1_5, 1_6, 2_4, 2_6.
check momentum_np2 momentum 1_5 2_6 2
check adam_np2 adam 2_4 2_6 2
check adam_augment_np2 adam 1_5 2_6 2 --augment shift:2

# Errors: a weights-only file, a resume with another batch size, and
# --save-every without --save.
timeout 60 "$bin/lenet_mnist" --data "$tmp/data" --epochs 1 --resume "$tmp/sgd/a.safetensors" \
  >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "is not a training checkpoint" "$tmp/err" ||
  fail "--resume of a weights file: $(cat "$tmp/err")"
timeout 60 "$bin/lenet_mnist" --data "$tmp/data" --epochs 2 --batch 16 --threads 1 --optimizer sgd \
  --resume "$tmp/sgd/a-1_10.safetensors" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "^error: Model::train: the checkpoint was saved training with batch size 8, this run has 16" "$tmp/err" ||
  fail "--resume with another --batch: $(cat "$tmp/err")"
timeout 60 "$bin/lenet_mnist" --data "$tmp/data" --epochs 1 --save-every 3 >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "^error: --save-every: needs --save FILE" "$tmp/err" ||
  fail "--save-every without --save: $(cat "$tmp/err")"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all resume checks passed"
