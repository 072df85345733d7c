#!/usr/bin/env bash
# What CI runs after scripts/test.sh (.ci/run): the whole suite built with
# clang-14 under AddressSanitizer and UndefinedBehaviorSanitizer (any report
# fails its test), then a bounded smoke pass of each libFuzzer target
# (tests/fuzz) from its seed corpus. Prints how long each part took.
#   MINIDL_FUZZ_SECONDS   seconds per fuzz target (default 30)
#   MINIDL_SANITIZE_BUILD the build folder (default build-sanitize)
# Extra arguments go to ctest (e.g. -R parallel_resume).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${MINIDL_SANITIZE_BUILD:-build-sanitize}
fuzz_seconds=${MINIDL_FUZZ_SECONDS:-30}
scripts/setup.sh
scripts/get_mnist.sh >/dev/null
scripts/get_text.sh >/dev/null

timings=()
timed() {  # timed LABEL COMMAND...: runs COMMAND and records its wall time
  local label=$1 start=$SECONDS
  shift
  "$@"
  timings+=("$(printf '%-28s %5d s' "$label" $((SECONDS - start)))")
}

# The library and everything else carry the fuzzer's coverage hooks too
# (-fsanitize=fuzzer-no-link), so one build serves the suite and the fuzzers.
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
timed "configure and build" bash -c "
  cmake -S . -B '$build' -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
    -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS='$flags -fsanitize=fuzzer-no-link' \
    -DCMAKE_EXE_LINKER_FLAGS='$flags' -DMINIDL_BUILD_BENCH=OFF -DMINIDL_CUDA=OFF -DMINIDL_FUZZ=ON >/dev/null &&
  cmake --build '$build' -j $(nproc)"

# Open MPI's allocations live until exit (LeakSanitizer suppressions), and its
# components must stay loaded for the leak check to symbolize them. Open MPI
# is built without frame pointers: only the slow unwinder reaches the libmpi
# frames the suppressions name (the fast one stops at an unknown caller).
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:strict_string_checks=1:check_initialization_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0
export OMPI_MCA_mca_base_component_disable_dlclose=1
# Not here: consumer builds a plain project against the instrumented library
# (checked in scripts/test.sh's build), docs_tutorial and docs_lab train full
# runs (and the lab times bench_train, which this build leaves out), and
# examples_portable_cpu runs the examples under qemu (too slow with ASan).
timed "ctest under ASan+UBSan" bash -c "cd '$build' && ctest --output-on-failure --timeout 900 \
  -E '^(consumer|docs_tutorial|docs_lab|examples_portable_cpu)\$' $*"

for target in idx safetensors checkpoint; do
  work=$(mktemp -d)
  timed "fuzz_$target ${fuzz_seconds} s" bash -c "
    '$build/bin/fuzz_$target' -max_total_time=$fuzz_seconds -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix='$work/' '$work' '$root/tests/fuzz/corpus/$target' 2>'$work/log' ||
      { tail -40 '$work/log'; exit 1; }
    grep -E '^Done [0-9]+ runs' '$work/log'"
  rm -rf "$work"
done

echo "check_sanitizers: all passed"
printf '  %s\n' "${timings[@]}"
