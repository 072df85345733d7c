#!/bin/bash
# lenet_mnist's configurations that must train alike, and one that must not:
# - --micro-size: a batch of 32 as 4 micro batches of 8 trains as the batch of
#   32 in one piece, and 2 ranks with 2 micro batches of 8 each as 1 rank with
#   32: the same per-step losses and final weights up to float32 rounding
#   (sums in another order). With --sum-loss (MindSpore's) the loss and the
#   gradient are the micro batches' sums, 4 times the mean: it trains as the
#   mean with 4 times the lr.
# - --model lenet-bn --norm sync on 2 ranks of 16 trains as 1 rank of 32
#   (SyncBatchNorm's statistics span both ranks); --norm batch, each rank's
#   own statistics, does not.
# A tiny IDX set is made here.
# usage: check_equivalence.sh BIN_DIR MPIEXEC
set -u
bin=$1 mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}
python3 "$(dirname "$0")/../tiny_mnist.py" "$tmp/data" 128 16 1

# run NAME [RANKS] ARGS...: one epoch of 4 steps, each step's loss logged
run() {
  local name=$1 ranks=$2
  shift 2
  local cmd=("$bin/lenet_mnist")
  [ "$ranks" -gt 1 ] && cmd=("$mpiexec" --oversubscribe -np "$ranks" "$bin/lenet_mnist" --parallel data)
  timeout 120 "${cmd[@]}" --data "$tmp/data" --epochs 1 --log-every 1 --threads 1 --no-shuffle \
    --save "$tmp/$name.safetensors" "$@" >"$tmp/$name.txt" 2>&1 ||
    fail "$name: $(tail -3 "$tmp/$name.txt")"
}
run whole 1 --batch 32
run micro 1 --batch 32 --micro-size 4
run micro_np2 2 --batch 16 --micro-size 2
run summed 1 --batch 32 --micro-size 4 --sum-loss
run lr4 1 --batch 32 --micro-size 4 --lr 0.04

# compare A B SCALE TOL: B's losses are SCALE times A's, and the final
# weights equal, within relative TOL
compare() {
  python3 - "$tmp" "$@" <<'PY' || fail "$2 against $1"
import json, re, struct, sys
tmp, a, b, scale, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
losses = [[float(x) for x in re.findall(r"loss is (\S+)", open(f"{tmp}/{n}.txt").read())] for n in (a, b)]
assert len(losses[0]) == 4 == len(losses[1]), losses
worst = max(abs(y - scale * x) / abs(scale * x) for x, y in zip(*losses))
def weights(n):
    raw = open(f"{tmp}/{n}.safetensors", "rb").read()
    k = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + k])
    out = {}
    for name, t in header.items():
        if name != "__metadata__":
            b0, b1 = t["data_offsets"]
            out[name] = struct.unpack(f"<{(b1 - b0) // 4}f", raw[8 + k + b0:8 + k + b1])
    return out
wa, wb = weights(a), weights(b)
assert wa.keys() == wb.keys()
diff = max(abs(x - y) / max(abs(x), 1e-3) for n in wa for x, y in zip(wa[n], wb[n]))
print(f"{b} against {a}: 4 losses within {worst:.1e}, final weights within {diff:.1e}")
assert worst <= tol and diff <= tol, (worst, diff)
PY
}
run bn 1 --batch 32 --model lenet-bn
run bn_sync_np2 2 --batch 16 --model lenet-bn --norm sync
run bn_batch_np2 2 --batch 16 --model lenet-bn --norm batch

compare whole micro 1 1e-5
compare whole micro_np2 1 1e-5
compare lr4 summed 4 1e-5
compare bn bn_sync_np2 1 1e-5
python3 - "$tmp" <<'PY' || fail "--norm batch on 2 ranks trained as 1 rank: each rank's statistics were not its own"
import re, sys
loss = lambda n: [float(x) for x in re.findall(r"loss is (\S+)", open(f"{sys.argv[1]}/{n}.txt").read())]
one, own = loss("bn"), loss("bn_batch_np2")
apart = max(abs(a - b) / abs(a) for a, b in zip(one[1:], own[1:]))
print(f"bn_batch_np2 against bn: losses after the first step apart by up to {apart:.1e}")
assert len(own) == 4 and apart > 1e-4
PY
grep -q "error: --norm: needs --model lenet-bn" <("$bin/lenet_mnist" --norm batch 2>&1) ||
  fail "--norm without --model lenet-bn was not refused"
[ "$failures" -eq 0 ] && echo "all equivalence checks passed"
exit $((failures > 0))
