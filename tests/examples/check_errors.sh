#!/bin/bash
# Runs the example programs on bad flags, bad inputs and a diverging run, and
# checks that each ends with exit status 1 and the error on one line
# "error: ..." (never an abort with 134, a hang, or a silent exit 0), alone
# and under mpirun. Data sets are made here: a small valid IDX set and a
# corrupt one.
# usage: check_errors.sh BIN_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}

# expect STATUS MESSAGE COMMAND...: COMMAND exits with STATUS within 60 s and
# its stderr holds MESSAGE; with STATUS 1 on one rank, stderr is that one line.
# The output stays in $tmp/stdout and $tmp/stderr for further checks.
expect() {
  local want=$1 message=$2
  shift 2
  local err rc
  timeout 60 "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  err=$(<"$tmp/stderr")
  local why=""
  [ "$rc" -eq "$want" ] || why="exit status $rc, expected $want"
  grep -qF -- "$message" <<<"$err" || why="${why:+$why; }no '$message' on stderr"
  if [ "$want" -eq 1 ] && [ "$1" != "$mpiexec" ] && ! grep -q -- "--nprocs 2" <<<"$*" &&
     { [ "$(wc -l <"$tmp/stderr")" -ne 1 ] || [[ "$err" != "error: "* ]]; }; then
    why="${why:+$why; }stderr is not one line 'error: ...'"
  fi
  if [ -n "$why" ]; then
    echo "FAILED: $*: $why; stderr:"
    head -c 2000 <<<"$err"
    failures=$((failures + 1))
  else
    echo "ok: $* -> $rc: $(grep -F -- "$message" <<<"$err" | head -1)"
  fi
}

# A valid MNIST-shaped set (64 train, 16 test images) and a copy whose
# training images have the 22-byte header whose sizes multiply past 2^64.
python3 "$(dirname "$0")/../tiny_mnist.py" "$tmp/good" 64 16 0
mkdir "$tmp/corrupt" && cp "$tmp"/good/* "$tmp/corrupt/"
printf '\x00\x00\x08\x03\x01\x00\x00\x00\x00\x01\x00\x00\x0e\x00\x00\x00\x0e\x02\x2c\x0e\x02\x00' \
  >"$tmp/corrupt/train-images-idx3-ubyte"

lenet="$bin/lenet_mnist"
good="--data $tmp/good --batch 8 --log-every 1"

# Runtime errors on one rank.
expect 1 "error: MnistDataset: no such directory '/nonexistent'" $lenet --data /nonexistent
expect 1 "error: read_idx: '$tmp/corrupt/train-images-idx3-ubyte': the header's sizes [16777216, 65536, 234881024] describe more than 2^40 values; the header is corrupt" \
  $lenet --data "$tmp/corrupt"
expect 1 "error: load_safetensors('$tmp/none.safetensors'): cannot open file: No such file or directory" \
  $lenet $good --init "$tmp/none.safetensors"
expect 1 "error: Model::train: the loss is " $lenet $good --lr 1e30
grep -Eq "(nan|inf) at step [2-8] \(epoch 1, step [2-8] of 8\); stopping" "$tmp/stderr" ||
  fail "--lr 1e30: no non-finite loss named at a step after the first"
# --detect-anomaly names the first op that made a NaN or inf from finite inputs.
expect 1 "error: detect_anomaly: the forward of " $lenet $good --lr 1e30 --detect-anomaly
grep -q "its inputs were finite" "$tmp/stderr" || fail "--detect-anomaly: no op with finite inputs named"

# Images of another size are named as the data's, not as the first Dense
# layer's input (20 x 20 gave "Dense(400, 120): expected input [N, 400]").
mkdir "$tmp/small"
python3 -c '
import struct, sys
d = sys.argv[1]
for split, n in (("train", 8), ("t10k", 4)):
    open(f"{d}/{split}-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, n, 20, 20) + bytes(n * 400))
    open(f"{d}/{split}-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, n) + bytes(n))
' "$tmp/small"
expect 1 "error: lenet_mnist: $tmp/small holds images of 20 x 20 pixels ([8, 1, 20, 20]); LeNet-5 takes 28 x 28" \
  $lenet --data "$tmp/small" --batch 4
expect 1 "error: --data: $tmp/small holds images of 20 x 20 pixels ([8, 1, 20, 20]); the model takes 28 x 28" \
  $bin/mlp_mnist --data "$tmp/small" --batch 4
expect 1 "error: --data: $tmp/small holds images of 20 x 20 pixels ([8, 1, 20, 20]); the model takes 28 x 28" \
  $bin/adasum --data "$tmp/small" --batch 4 --reduce mean

# Output paths are checked before any training (nothing on stdout yet).
expect 1 "error: --save: cannot write '$tmp/missing/w.safetensors': creating a file in '$tmp/missing' failed: No such file or directory" \
  $lenet $good --save "$tmp/missing/w.safetensors"
[ -s "$tmp/stdout" ] && fail "--save was checked after the data was loaded"
expect 1 "error: --save: '/dev/full' is a character device, not a regular file; refusing to replace it with one" \
  $lenet $good --save /dev/full
expect 1 "error: --history: cannot write '$tmp/missing/h.csv'" $lenet $good --history "$tmp/missing/h"
expect 1 "error: --timeline: cannot write '$tmp/missing/t.json'" $lenet $good --timeline "$tmp/missing/t.json"

# Flags.
expect 1 "error: --device: gpu not in {cpu,cuda,auto}" $lenet --device gpu
expect 1 "error: --cuda-graph: needs the network on CUDA (--device cuda, or auto with a GPU); --device cpu runs it on the CPU" \
  $lenet $good --device cpu --cuda-graph --epochs 1 --steps 2
[ -s "$tmp/stdout" ] && fail "--cuda-graph on the CPU was checked after the data was loaded"
expect 1 "error: --cuda-graph: needs the network on CUDA (--device cuda, or auto with a GPU); --device cpu runs it on the CPU" \
  $bin/mlp_mnist $good --device cpu --cuda-graph --epochs 1 --steps 2
[ -s "$tmp/stdout" ] && fail "mlp_mnist: --cuda-graph on the CPU was checked after the data was loaded"
expect 1 "error: --cuda-graph: needs --parallel none" \
  $lenet $good --cuda-graph --parallel data --epochs 1 --steps 2
if ! command -v nvidia-smi >/dev/null; then  # no GPU here: cuda is refused, auto is the CPU
  expect 1 "error: --device cuda: no CUDA device here (use --device cpu or auto)" $lenet $good --device cuda
  expect 0 "" $lenet $good --device auto --epochs 1 --steps 2
  grep -q "device cpu" "$tmp/stdout" || fail "--device auto without a GPU did not print 'device cpu'"
  expect 1 "error: --device cuda: no CUDA device here (use --device cpu or auto)" $bin/grad_reducer --device cuda
  expect 0 "" $bin/grad_reducer --device auto
  [ "$(tail -n 1 "$tmp/stdout")" = "256.0" ] || fail "grad_reducer --device auto printed '$(<"$tmp/stdout")', not 256.0 last"
  expect 0 "" $bin/data_parallel --device auto --steps 2
fi
expect 1 "error: --device: gpu not in {cpu,cuda,auto}" $bin/grad_reducer --device gpu
expect 1 "error: --batch: expected an integer from 1 to 1000000, got 'abc'" $lenet --batch abc
expect 1 "error: --batch: expected an integer from 1 to 1000000, got '9223372036854775807'" \
  $lenet --batch 9223372036854775807
expect 1 "error: --lr: expected a finite number >= 0, got 'nan'" $lenet --lr nan
expect 1 "error: --lr: expected a finite number >= 0, got 'abc'" $lenet --lr abc
expect 1 "error: --lr: expected a finite number >= 0, got '-0.1'" $lenet --lr -0.1
expect 1 "error: --augment: expected shift:K with K from 0 to 27, got 'shift:28'" $lenet --augment shift:28
expect 1 "error: --augment: expected shift:K with K from 0 to 27, got 'crop:2'" $lenet --augment crop:2
expect 1 "error: --threads: expected an integer from 1 to 1024, got '2147483648'" $lenet --threads 2147483648
expect 1 "error: --threads: expected an integer from 1 to 1024, got '4294967297'" $lenet --threads 4294967297
expect 1 "error: --threads: expected an integer from 1 to 1024, got '-1'" $lenet --threads -1
expect 1 "error: --steps: expected an integer from 0 to 1000000000, got '-5'" $lenet --steps -5
expect 1 "error: --epochs: expected an integer from 1 to 1000000, got '0'" $lenet --epochs 0
expect 1 "error: --bucket-kb: expected an integer from 1 to 1048576, got '99999999999999999'" \
  $lenet --bucket-kb 99999999999999999
expect 1 "error: --seed: expected an integer from 0 to 2^64 - 1, got '-1'" $lenet --seed -1
expect 1 "error: --check-replicas: expected an integer from 0 to 1000000000, got 'x'" $lenet --check-replicas x
expect 1 "error: --dataset: foo not in {mnist,fashion}" $lenet --dataset foo
expect 1 "error: --model: resnet not in {lenet,lenet-bn}" $lenet --model resnet
expect 0 "" $lenet $good --model lenet-bn --epochs 1 --steps 2
expect 1 "error: --nprocs: expected an integer from 1 to 1024, got '0'" $lenet --nprocs 0
expect 1 "error: --nprocs: expected an integer from 1 to 1024, got '1025'" $lenet --nprocs 1025
expect 1 "error: The following argument was not expected: --bogus" $lenet --bogus
expect 1 "error: --micro-size: expected an integer from 1 to 1000000, got '0'" "$bin/mlp_mnist" --micro-size 0
expect 1 "error: --micro-size: 8 micro batches need a --batch of at least 8 samples, got 4" \
  "$bin/mlp_mnist" --micro-size 8 --batch 4
[ -s "$tmp/stdout" ] && fail "--micro-size above --batch was checked after the data was loaded"
# An epoch's short last batch (64 samples in batches of 7 end with 1, fewer
# than --micro-size 7) trains and the run saves, instead of failing at the end.
expect 0 "" "$bin/mlp_mnist" --data "$tmp/good" --batch 7 --micro-size 7 --epochs 1 --threads 1 \
  --save "$tmp/short.safetensors"
[ -s "$tmp/short.safetensors" ] || fail "--micro-size 7 --batch 7: the run with a short last batch saved nothing"
expect 1 "error: --reduce: foo not in {adasum,mean}" "$bin/adasum" --reduce foo
expect 1 "error: --steps: expected an integer from 0 to 1000000000, got '-1'" "$bin/data_parallel" --steps -1
expect 1 "error: --device: gpu not in {cpu,cuda,auto}" "$bin/data_parallel" --device gpu

# The six training examples share one flag set (examples/common.h); a shared
# flag an example cannot honour is refused, naming the flag and the example.
declare -A value=([--data]="$tmp/good" [--dataset]=fashion [--epochs]=1 [--seed]=1
  [--steps]=1 [--log-every]=1 [--augment]=shift:1 [--init]="$tmp/none.safetensors"
  [--save]="$tmp/s.safetensors" [--save-every]=1 [--keep-last]=1 [--resume]="$tmp/r.safetensors"
  [--parallel]=data [--history]="$tmp/h" [--timeline]="$tmp/t.json" [--bucket-kb]=64
  [--check-replicas]=1 [--no-shuffle]="" [--detect-anomaly]="" [--cuda-graph]="" [--warmup]=2
  [--lr-scaling]=linear)
refused() {  # refused PROGRAM FLAG...
  local program=$1 flag
  shift
  for flag in "$@"; do
    expect 1 "error: $flag: $program cannot honour this flag" "$bin/$program" $flag ${value[$flag]}
    [ -s "$tmp/stdout" ] && fail "$program $flag: refused after something ran"
  done
}
refused adasum --save-every --keep-last --resume --parallel --bucket-kb --cuda-graph
refused mnist_train_loop --save-every --keep-last --resume --parallel --cuda-graph
refused data_parallel --data --dataset --epochs --no-shuffle --augment --init --save --save-every \
  --keep-last --resume --parallel --cuda-graph --history --timeline --bucket-kb
refused grad_reducer --data --dataset --epochs --seed --steps --log-every --no-shuffle --augment \
  --init --save --save-every --keep-last --resume --parallel --cuda-graph --history --timeline \
  --bucket-kb --check-replicas --warmup --lr-scaling
# --help lists the refused ones apart.
expect 0 "" "$bin/adasum" --help
grep -q "Refused by adasum" "$tmp/stdout" || fail "adasum --help: no 'Refused by adasum' group"
# --batch is per rank everywhere, and each example says so in one line.
for run in "lenet_mnist $good --epochs 1 --steps 1" "mlp_mnist $good --epochs 1 --steps 1" \
           "adasum $good --epochs 1 --steps 1 --reduce mean" \
           "mnist_train_loop $good --epochs 1 --steps 1" "data_parallel --batch 8 --steps 1" \
           "grad_reducer --batch 8"; do
  expect 0 "" $bin/$run
  grep -qx "batch 8 per rank x 1 rank = 8.*" "$tmp/stdout" ||
    fail "${run%% *}: no line 'batch 8 per rank x 1 rank = 8'"
done
expect 0 "" $lenet --help

# What works still works: a short run that saves.
expect 0 "" $lenet $good --steps 2 --threads 1 --save "$tmp/w.safetensors"
[ -s "$tmp/w.safetensors" ] || fail "the good run saved nothing"
# --steps 0 saves the initial weights (tools/lenet_torch_reference.py starts
# from them): reloaded and saved again they are the same bytes, and two steps
# of training changed them.
expect 0 "" $lenet $good --steps 0 --threads 1 --save "$tmp/w0.safetensors"
expect 0 "" $lenet $good --steps 0 --threads 1 --init "$tmp/w0.safetensors" --save "$tmp/w0b.safetensors"
cmp -s "$tmp/w0.safetensors" "$tmp/w0b.safetensors" || fail "--steps 0 --init did not save the weights it loaded"
cmp -s "$tmp/w0.safetensors" "$tmp/w.safetensors" && fail "--steps 0 saved trained weights"

# Under mpirun: one rank's error (--save is checked on rank 0 only) ends the
# job with status 1; so does an error on every rank, and a diverging run.
expect 1 "error: rank 0: --save: cannot write '$tmp/missing/w.safetensors'" \
  "$mpiexec" --oversubscribe -np 2 $lenet $good --parallel data --save "$tmp/missing/w.safetensors"
expect 1 "MnistDataset: no such directory '/nonexistent'" \
  $lenet --nprocs 2 --parallel data --data /nonexistent
grep -q "^error: rank [01]: MnistDataset" "$tmp/stderr" || fail "--nprocs 2: no 'error: rank R: ' line"
expect 1 "Model::train: the loss is " "$mpiexec" --oversubscribe -np 2 $lenet $good --parallel data --lr 1e30
# The batch line counts the ranks; --check-replicas says when the replicas agree.
expect 0 "" "$mpiexec" --oversubscribe -np 2 $lenet $good --parallel data --steps 4 --check-replicas 2 \
  --lr 0.01 --lr-scaling linear --warmup 2
grep -qx "batch 8 per rank x 2 ranks = 16" "$tmp/stdout" || fail "lenet_mnist on 2 ranks: no batch line"
grep -qx "lr 0.02 = --lr 0.01 x 2 ranks (--lr-scaling linear), warmed up linearly from 0.01 over the first 2 steps" \
  "$tmp/stdout" || fail "lenet_mnist --lr-scaling linear --warmup 2: no lr line"
[ "$(grep -c "^replicas agree at step [24] (epoch 1 step [24]): 10 parameters identical on 2 ranks" "$tmp/stdout")" -eq 2 ] ||
  fail "lenet_mnist --check-replicas 2 --steps 4: not two 'replicas agree' lines"
expect 0 "" "$mpiexec" --oversubscribe -np 2 "$bin/adasum" $good --steps 2 --check-replicas 1
grep -qx "batch 8 per rank x 2 ranks = 16, adasum" "$tmp/stdout" || fail "adasum on 2 ranks: no batch line"
grep -q "^replicas agree at step 2 " "$tmp/stdout" || fail "adasum --check-replicas 1: no 'replicas agree' line"
expect 0 "" "$bin/data_parallel" --nprocs 2 --steps 4 --check-replicas 4
grep -q "^replicas agree at step 4 (epoch 1 step 4): 4 parameters identical on 2 ranks" "$tmp/stdout" ||
  fail "data_parallel --check-replicas 4: no 'replicas agree' line"
# --lr-scaling linear --warmup 4 on 2 ranks: lr 0.001 x 2, reached linearly
# from 0.001 (step 1) by 0.00025 a step at step 5 (Goyal et al. 2017).
expect 0 "" "$bin/data_parallel" --nprocs 2 --steps 6 --lr 0.001 --lr-scaling linear --warmup 4
[ "$(sed -n 's/^step \([0-9]\), loss [0-9.]*, lr /\1 /p' "$tmp/stdout" | tr '\n' ' ')" = \
  "1 0.001 2 0.00125 3 0.0015 4 0.00175 5 0.002 6 0.002 " ] ||
  fail "data_parallel --lr-scaling linear --warmup 4: not the schedule's lrs: $(<"$tmp/stdout")"

# Ranks started with different flags (MPMD) stop at once with both values
# named, instead of waiting for each other forever.
expect 1 "error: rank 1: Model::train: rank 1 has batch size 4 where rank 0 has 8" \
  "$mpiexec" --oversubscribe -np 1 $lenet --data "$tmp/good" --batch 8 --parallel data \
  : -np 1 $lenet --data "$tmp/good" --batch 4 --parallel data
expect 1 "Model::train: rank 1 has epochs 2 where rank 0 has 1" \
  "$mpiexec" --oversubscribe -np 1 $lenet $good --parallel data --epochs 1 : -np 1 $lenet $good --parallel data --epochs 2
expect 1 "DataParallel: rank 1 has bucket_bytes 65536 where rank 0 has 26214400" \
  "$mpiexec" --oversubscribe -np 1 $lenet $good --parallel data : -np 1 $lenet $good --parallel data --bucket-kb 64
# Flags that choose the samples a rank sees, or what is written, must agree across ranks.
expect 1 "flags: rank 1 has --seed 1 where rank 0 has 0" \
  "$mpiexec" --oversubscribe -np 1 $lenet $good --parallel data : -np 1 $lenet $good --parallel data --seed 1
expect 1 "flags: rank 1 has --no-shuffle on where rank 0 has off" \
  "$mpiexec" --oversubscribe -np 1 $lenet $good --parallel data : -np 1 $lenet $good --parallel data --no-shuffle
expect 1 "flags: rank 1 has --augment shift:2 where rank 0 has (none)" \
  "$mpiexec" --oversubscribe -np 1 $lenet $good --parallel data : -np 1 $lenet $good --parallel data --augment shift:2
expect 1 "flags: rank 1 has --save $tmp/rank1.safetensors where rank 0 has (none)" \
  "$mpiexec" --oversubscribe -np 1 $lenet $good --parallel data : -np 1 $lenet $good --parallel data --save "$tmp/rank1.safetensors"
[ ! -e "$tmp/rank1.safetensors" ] || fail "a refused run wrote $tmp/rank1.safetensors"

echo "check_errors: $failures failure(s)"
[ "$failures" -eq 0 ]
