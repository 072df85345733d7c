#!/bin/bash
# lenet_mnist on CUDA takes the CPU's steps: 20 steps (batch 16, in file
# order) from the same --init weights on a tiny learnable set: the CUDA
# losses within 1e-4 relative of the CPU's (issue 10's LeNet check).
# Without a GPU it prints one line and exits 77 (ctest: skipped).
# usage: check_cuda_lenet.sh BIN_DIR [DEVICE [PROGRAM]]   (DEVICE cpu checks
# the check; PROGRAM lenet_mnist_cuda_on_cpu runs the CUDA kernels on the CPU,
# tools/cuda_on_cpu)
set -eu
bin=$1 device=${2:-cuda} program=${3:-lenet_mnist}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$(dirname "$0")/../tiny_mnist.py" "$tmp" 64 16 0 --learnable
if ! "$bin/$program" --data "$tmp" --steps 0 --device "$device" >"$tmp/probe" 2>&1; then
  grep -q "no CUDA device" "$tmp/probe" && { echo "cuda: no CUDA device, examples_cuda_lenet skipped"; exit 77; }
  cat "$tmp/probe"
  exit 1
fi
"$bin/lenet_mnist" --data "$tmp" --steps 0 --save "$tmp/init.safetensors" >/dev/null
run() {  # $1: program, $2: device, $3: the output file
  timeout 120 "$bin/$1" --data "$tmp" --init "$tmp/init.safetensors" --steps 20 \
    --no-shuffle --batch 16 --log-every 1 --threads 1 --device "$2" >"$3"
}
run lenet_mnist cpu "$tmp/cpu"
run "$program" "$device" "$tmp/other"
python3 - "$tmp/cpu" "$tmp/other" "$device" <<'PY'
import re, sys
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"loss is ([0-9.e+-]+)", open(path).read())]
cpu, other = losses(sys.argv[1]), losses(sys.argv[2])
assert len(cpu) == 20 and len(other) == 20, f"expected 20 losses each, got {cpu} and {other}"
worst = max(abs(a - b) / abs(a) for a, b in zip(cpu, other))
print(f"20 LeNet steps, {sys.argv[3]} against cpu: losses {cpu[0]:.6f} -> {cpu[-1]:.6f}, "
      f"largest relative difference {worst:.2e}")
assert worst <= 1e-4, f"cpu {cpu} vs {sys.argv[3]} {other}"
PY
