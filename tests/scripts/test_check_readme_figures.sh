#!/usr/bin/env bash
# check_readme_figures.sh fails on a stale README: against a stand-in
# lenet_mnist that prints fixed lines (no build or data needed), a README
# showing those lines passes; one with a loss or an accuracy that is not what
# the program prints fails; with other OpenBLAS kernels, in a -march=native
# build or in a sanitizer build, the first loss passes within a relative 1e-5
# and the accuracy within 0.01, later losses are not compared, and beyond
# those tolerances it fails; a README without the marker fails.
# Usage: test_check_readme_figures.sh SCRIPT
set -euo pipefail
script=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
# The stand-in: KERNELS, LOSS1, LOSS2 and ACC from the environment.
cat > "$tmp/bin/lenet_mnist" <<'EOF'
#!/usr/bin/env bash
echo "mnist: 8000 training and 2000 test images from X, 1 rank(s) x 1 threads, OpenBLAS ${KERNELS} kernels, device cpu"
echo "epoch 1/10: step 12/125, loss 2.2817, 13673 samples/s, ETA 0:01"
echo "epoch: 1 step: 100, loss is ${LOSS1}"
echo "epoch: 2 step: 100, loss is ${LOSS2:-0.2614346742630005}"
echo "test accuracy: ${ACC}  test loss: 0.1062"
EOF
chmod +x "$tmp/bin/lenet_mnist"
readme() {  # readme FILE KERNELS LOSS1 ACC [MARKER]
  printf '%s\n' "# x" "${5:-<!-- docs_readme_figures: OpenBLAS $2 kernels -->}" '```' \
    '$ build/bin/lenet_mnist' "epoch: 1 step: 100, loss is $3" \
    "epoch: 2 step: 100, loss is 0.2614346742630005" "test accuracy: $4  test loss: 0.1062" \
    '```' > "$1"
}
failures=0
expect() {  # expect pass|fail WHAT README_ARGS... -- RUN_KERNELS RUN_LOSS1 RUN_ACC [NATIVE]
  local want=$1 what=$2 args=() rc=0
  shift 2
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  shift
  readme "$tmp/README.md" "${args[@]}"
  KERNELS=$1 LOSS1=$2 ACC=$3 bash "$script" "$tmp/bin" "$tmp/README.md" "${4:-OFF}" > "$tmp/out" 2>&1 ||
    rc=$?
  if [[ $want == pass && $rc != 0 || $want == fail && $rc == 0 ]]; then
    echo "FAILED: $what: expected $want, got status $rc:"; cat "$tmp/out"
    failures=$((failures + 1))
  else
    echo "ok: $what ($want)"
  fi
}
expect pass "the same lines" Cooperlake 0.6435063481330872 0.9750 -- Cooperlake 0.6435063481330872 0.9750
expect fail "a stale loss" Cooperlake 0.41 0.9750 -- Cooperlake 0.6435063481330872 0.9750
expect fail "a stale accuracy" Cooperlake 0.6435063481330872 0.9705 -- Cooperlake 0.6435063481330872 0.9750
expect pass "other kernels, close" Cooperlake 0.6435063481330872 0.9750 -- Haswell 0.6435065865516663 0.9765
expect fail "other kernels, loss too far" Cooperlake 0.6435063481330872 0.9750 -- Haswell 0.6436 0.9750
expect fail "other kernels, accuracy too far" Cooperlake 0.6435063481330872 0.9750 -- Haswell 0.6435063481330872 0.9900
LOSS2=0.25 expect fail "same kernels, a later loss differs" Cooperlake 0.6435063481330872 0.9750 -- Cooperlake 0.6435063481330872 0.9750
LOSS2=0.25 expect pass "a native build, a later loss differs" Cooperlake 0.6435063481330872 0.9750 -- Cooperlake 0.6435063481330872 0.9750 ON
LOSS2=0.25 expect fail "a native build, the first loss differs" Cooperlake 0.6435063481330872 0.9750 -- Cooperlake 0.6436 0.9750 ON
echo "# __asan_init: this stand-in looks like a sanitizer build" >> "$tmp/bin/lenet_mnist"
LOSS2=0.25 expect pass "a sanitizer build, a later loss differs" Cooperlake 0.6435063481330872 0.9750 -- Cooperlake 0.6435063481330872 0.9750
expect fail "no marker" Cooperlake 0.6435063481330872 0.9750 "<!-- other -->" -- Cooperlake 0.6435063481330872 0.9750
((failures == 0)) || exit 1
