#!/bin/bash
# The default (portable) build on older CPUs: mnist_train_loop trains under
# qemu-user emulating a Core 2 (Conroe: SSSE3, below x86-64-v2, no AVX; the
# baseline code and im2col convolutions) and a CPU with AVX2 but no AVX-512
# (Haswell: the x86-64-v3 clones), with no illegal instruction, and its test
# losses equal this machine's to 1e-5. (qemu's default qemu64 model makes
# OpenBLAS pick 3DNow! kernels that qemu cannot run: not minidl's code.) Skipped (77) without qemu-x86_64 (Debian's
# qemu-user) or on a MINIDL_NATIVE build, which such CPUs cannot run.
# usage: check_portable.sh BIN_DIR NATIVE(ON|OFF)
set -eu
bin=$1 native=$2
if [ "$native" = ON ]; then echo "skipped: a MINIDL_NATIVE build"; exit 77; fi
if ! command -v qemu-x86_64 > /dev/null; then echo "skipped: no qemu-x86_64"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$(dirname "$0")/../tiny_mnist.py" "$tmp" 64 16 0 --learnable
args="--data $tmp --epochs 2 --batch 16 --dropout 0 --lr 0.05"
# OpenBLAS picks its kernels from the (emulated) CPU only when no core type is forced
run() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@" "$bin/mnist_train_loop" $args; }
run > "$tmp/host"
for cpu in Conroe Haswell; do
  # (qemu warns on stderr about host features TCG lacks; shown on failure only)
  run qemu-x86_64 -cpu $cpu > "$tmp/$cpu" 2> "$tmp/$cpu.err" ||
    { cat "$tmp/$cpu" "$tmp/$cpu.err"; echo "failed under qemu -cpu $cpu"; exit 1; }
done
python3 - "$tmp" <<'PY'
import re, sys
def losses(name):
    return [float(x) for x in re.findall(r"test loss ([0-9.]+)", open(f"{sys.argv[1]}/{name}").read())]
host = losses("host")
assert len(host) == 2, host
for cpu in ("Conroe", "Haswell"):
    got = losses(cpu)
    diff = max(abs(a - b) for a, b in zip(host, got)) if len(got) == 2 else float("inf")
    print(f"qemu -cpu {cpu}: test losses {got}, max difference from this CPU's {diff:.1e}")
    assert diff <= 1e-5, f"{cpu}: {got} vs {host}"
PY
