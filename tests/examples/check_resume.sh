#!/bin/bash
# Exact resume through the example program: a run with --save-every, and the
# same run resumed from one of its mid-epoch checkpoints, print the same losses
# from there on and save the same final weights, byte for byte: SGD, Momentum
# and Adam on one rank, Adam on 2 ranks under mpirun, and with random shifts
# (--augment, drawn per image and epoch) on 1 and 2 ranks; on another rank
# count --resume refuses and --init takes the weights alone. A tiny IDX set
# is made here.
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
# --lr-scaling linear with --warmup 8: resumed from step 5, mid warm-up, the
# lr goes on from the schedule's step 6 (the checkpoint holds it).
check momentum_warmup_np2 momentum 1_5 2_6 2 --lr-scaling linear --warmup 8

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

# --resume with another --lr is refused naming both (the checkpoint's lr would
# otherwise win without a word).
timeout 60 "$bin/lenet_mnist" --data "$tmp/data" --epochs 2 --batch 8 --threads 1 --optimizer sgd \
  --lr 0.05 --resume "$tmp/sgd/a-1_10.safetensors" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(cat "$tmp/err")" = "error: --resume: $tmp/sgd/a-1_10.safetensors was trained with lr 0.01, this run has --lr 0.05; give --lr 0.01 (a resume continues the saved run bit for bit, its lr included)" ] ||
  fail "--resume with another --lr: $(cat "$tmp/err")"

# ... and without them the lr is not the run's: refused, naming both.
timeout 60 "$mpiexec" --oversubscribe -np 2 "$bin/lenet_mnist" --parallel data --data "$tmp/data" \
  --epochs 2 --batch 8 --threads 1 --optimizer momentum --lr-scaling linear \
  --resume "$tmp/momentum_warmup_np2/a-1_5.safetensors" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "was trained with lr 0\.0162[0-9]*, this run has lr 0\.02 at step 6 from --lr 0.01; give the --lr, --lr-scaling and --warmup it had" "$tmp/err" ||
  fail "--resume of a warm-up run without --warmup: $(cat "$tmp/err")"

# A checkpoint inconsistent with itself is refused naming the file and the
# entry: an epoch of 2^63 - 1 (it overflowed the example's arithmetic), a
# missing momentum buffer of a parameter that has taken steps.
edit_checkpoint() {  # edit_checkpoint IN OUT PYTHON-STATEMENT (on meta and header)
  python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
src, dst, stmt = sys.argv[1:]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header["__metadata__"]
exec(stmt)
data, offset = b"", 0  # the remaining tensors' bytes, repacked in their order
for name, t in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                      key=lambda item: item[1]["data_offsets"][0]):
    begin, end = t["data_offsets"]
    data += raw[8 + n + begin:8 + n + end]
    t["data_offsets"] = [offset, offset + end - begin]
    offset += end - begin
text = json.dumps(header).encode()
text += b" " * ((8 - len(text) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data)
PY
}
good="$tmp/momentum/a-1_10.safetensors"
edit_checkpoint "$good" "$tmp/epoch.safetensors" 'meta["epoch"] = str(2**63 - 1)'
timeout 60 "$bin/lenet_mnist" --data "$tmp/data" --epochs 2 --batch 8 --threads 1 --optimizer momentum \
  --resume "$tmp/epoch.safetensors" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(cat "$tmp/err")" = "error: Model::load_checkpoint: $tmp/epoch.safetensors: 'epoch' is 9223372036854775807, expected 0 to 2^53" ] ||
  fail "--resume of a checkpoint with epoch 2^63 - 1: $(cat "$tmp/err")"
edit_checkpoint "$good" "$tmp/buffer.safetensors" 'del header["optimizer.momentum_buffer.3"]'
timeout 60 "$bin/lenet_mnist" --data "$tmp/data" --epochs 2 --batch 8 --threads 1 --optimizer momentum \
  --resume "$tmp/buffer.safetensors" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(cat "$tmp/err")" = "error: Model::load_checkpoint: $tmp/buffer.safetensors: Momentum::load_state_dict: 'momentum_buffer.3' is missing, but parameter 3 [16] has taken 10 step(s) (expected its momentum_buffer, float32 [16])" ] ||
  fail "--resume of a checkpoint without a momentum buffer: $(cat "$tmp/err")"

# Another rank count: --resume refuses, naming the ranks and --init; --init
# takes the checkpoint's weights alone (one line says what stays behind) and
# trains as --init of the same weights saved as a plain file (the "model."
# entries, extracted here): the same losses and final weights on 2 ranks.
ckpt="$tmp/momentum/a-1_10.safetensors"
timeout 60 "$mpiexec" --oversubscribe -np 2 "$bin/lenet_mnist" --parallel data --data "$tmp/data" \
  --epochs 2 --batch 8 --threads 1 --optimizer momentum --resume "$ckpt" >/dev/null 2>"$tmp/err"
[ $? -ne 0 ] && grep -q "saved training with ranks 1, this run has 2; .*--init takes a checkpoint's weights alone" "$tmp/err" ||
  fail "--resume on 2 ranks of a 1-rank checkpoint: $(cat "$tmp/err")"
python3 - "$ckpt" "$tmp/weights.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
out, data = {}, b""
for name, t in sorted(header.items(), key=lambda kv: kv[0]):
    if not name.startswith("model."):
        continue
    begin, end = t["data_offsets"]
    out[name[6:]] = dict(t, data_offsets=[len(data), len(data) + end - begin])
    data += raw[8 + n + begin:8 + n + end]
text = json.dumps(out).encode()
text += b" " * ((8 - len(text) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data)
PY
for from in "$ckpt" "$tmp/weights.safetensors"; do
  name=$(basename "$from" .safetensors)
  timeout 120 "$mpiexec" --oversubscribe -np 2 "$bin/lenet_mnist" --parallel data --data "$tmp/data" \
    --epochs 1 --batch 8 --log-every 1 --threads 1 --optimizer momentum --init "$from" \
    --save "$tmp/init-$name.safetensors" >"$tmp/init-$name.txt" 2>&1 ||
    fail "--init $from on 2 ranks: $(tail -3 "$tmp/init-$name.txt")"
done
grep -q "^--init: the weights of training checkpoint $ckpt; its optimizer state, learning-rate schedule and data position are not carried: this run starts at step 1" \
  "$tmp/init-a-1_10.txt" || fail "--init of a checkpoint: no line saying what it leaves behind"
[ "$(grep -c "loss is" "$tmp/init-a-1_10.txt")" -gt 0 ] &&
  diff <(grep "loss is" "$tmp/init-a-1_10.txt") <(grep "loss is" "$tmp/init-weights.txt") >/dev/null &&
  cmp -s "$tmp/init-a-1_10.safetensors" "$tmp/init-weights.safetensors" ||
  fail "--init of a checkpoint and of its weights as a plain file train differently"
echo "ok: --init of a 1-rank checkpoint on 2 ranks: its weights, as a plain file of them"

# --keep-last 2 keeps the run's two newest checkpoints (of 1_5, 1_10, 1_12,
# 2_3, 2_8, 2_12), and saving to a path removes the temporary file a killed
# save to it left (its pid is gone), not a live process's.
mkdir "$tmp/keep"
(exit 0) &
dead=$!
wait "$dead"
echo partial >"$tmp/keep/k-1_5.safetensors.tmp.$dead"
echo partial >"$tmp/keep/k-1_5.safetensors.tmp.$$"
timeout 120 "$bin/lenet_mnist" --data "$tmp/data" --epochs 2 --batch 8 --threads 1 --optimizer sgd \
  --save-every 5 --keep-last 2 --save "$tmp/keep/k.safetensors" >"$tmp/keep.txt" 2>&1 ||
  fail "--keep-last 2: $(tail -3 "$tmp/keep.txt")"
[ "$(LC_ALL=C ls "$tmp/keep" | tr '\n' ' ')" = "k-1_5.safetensors.tmp.$$ k-2_12.safetensors k-2_8.safetensors k.safetensors " ] ||
  fail "--keep-last 2 and stale temporaries: the directory holds $(LC_ALL=C ls "$tmp/keep" | tr '\n' ' ')"
cmp -s "$tmp/keep/k-2_12.safetensors" "$tmp/sgd/a-2_12.safetensors" ||
  fail "--keep-last 2: k-2_12 differs from the same run's a-2_12 without it"
timeout 60 "$bin/lenet_mnist" --data "$tmp/data" --epochs 1 --keep-last 2 --save "$tmp/x.safetensors" \
  >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "^error: --keep-last: needs --save-every N" "$tmp/err" ||
  fail "--keep-last without --save-every: $(cat "$tmp/err")"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all resume checks passed"
