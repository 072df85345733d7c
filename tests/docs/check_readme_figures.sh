#!/usr/bin/env bash
# The README's Quick start result is what its command prints today.
#
# Usage: check_readme_figures.sh BIN_DIR [README [NATIVE]]
#
# Reads the block after the marker `<!-- docs_readme_figures: OpenBLAS K kernels -->`
# in README (default: the README.md beside tests/): its first line is the
# command (`$ build/bin/PROGRAM ARGS`), the others are lines it prints
# (`epoch: E step: S, loss is L`, `test accuracy: A  test loss: T`). Runs the
# command with BIN_DIR's PROGRAM (OMP_NUM_THREADS=1 unless set: the thread
# count does not change the results) and compares:
# - in a build like the README's (the default portable build, NATIVE not ON,
#   no sanitizers) whose OpenBLAS kernels (named on the run's first line) are
#   K: every line exactly, as text;
# - otherwise (other kernels, -march=native code or another compiler sum
#   float32 values in another order, and two runs part after about 150
#   steps): the first loss line to a relative 1e-5, and the test accuracy
#   to 0.01 (one point).
# So a README left stale by a change to the results fails here. Needs MNIST
# (scripts/get_mnist.sh).
set -euo pipefail
bin=${1:?usage: check_readme_figures.sh BIN_DIR [README [NATIVE]]}
readme=${2:-$(dirname "$0")/../../README.md}
native=${3:-OFF}
[[ -d $bin ]] || { echo "check_readme_figures: no folder $bin" >&2; exit 1; }
bin=$(cd "$bin" && pwd)

# The marker's kernels and the block after it.
kernels=$(sed -n 's/^<!-- docs_readme_figures: OpenBLAS \([A-Za-z0-9_]*\) kernels -->$/\1/p' "$readme")
[[ -n $kernels ]] || { echo "check_readme_figures: no '<!-- docs_readme_figures: OpenBLAS K kernels -->' in $readme" >&2; exit 1; }
block=$(awk '/^<!-- docs_readme_figures: / {m = 1; next}
             m == 1 && /^```/ {m = 2; next}
             m == 2 && /^```/ {exit}
             m == 2 {print}' "$readme")
command=$(head -1 <<< "$block")
[[ $command == '$ build/bin/'* ]] || { echo "check_readme_figures: the block's first line is not '\$ build/bin/PROGRAM ...': $command" >&2; exit 1; }
expected=$(tail -n +2 <<< "$block")
grep -q '^epoch: [0-9]* step: [0-9]*, loss is ' <<< "$expected" &&
  grep -q '^test accuracy: ' <<< "$expected" ||
  { echo "check_readme_figures: the block shows no loss line or no accuracy line" >&2; exit 1; }

read -r -a argv <<< "${command#\$ build/bin/}"
argv[0]=$bin/${argv[0]}
echo "==> ${argv[*]} (OMP_NUM_THREADS=${OMP_NUM_THREADS:-1})"
out=$(OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} timeout 300 "${argv[@]}" < /dev/null 2>&1) ||
  { tail -5 <<< "$out"; echo "check_readme_figures: the command failed" >&2; exit 1; }
actual_kernels=$(sed -n 's/.*OpenBLAS \([A-Za-z0-9_]*\) kernels.*/\1/p' <<< "$out" | head -1)
echo "README: OpenBLAS $kernels kernels; this run: OpenBLAS ${actual_kernels:-?} kernels"
exact=0
if [[ $actual_kernels == "$kernels" ]]; then exact=1; fi
if [[ $native == ON ]]; then exact=0; echo "a -march=native build: compared within tolerances"; fi
if grep -qa -e __asan_init -e __ubsan_handle "${argv[0]}"; then
  exact=0
  echo "a build with sanitizers (clang): compared within tolerances"
fi

failures=0 first=1
while IFS= read -r want; do
  if [[ $want == epoch:* ]]; then
    key=${want%%, loss is *}
    got=$(grep -m1 -F "$key, loss is " <<< "$out" || true)
  else
    key="test accuracy"
    got=$(grep -m1 '^test accuracy: ' <<< "$out" || true)
  fi
  if [[ -z $got ]]; then
    echo "MISSING: the run printed no '$key' line (README: $want)"
    failures=$((failures + 1))
  elif ((exact)); then
    if [[ $got == "$want" ]]; then echo "same:    $got"; else
      echo "DIFFERS: README '$want', run '$got'"
      failures=$((failures + 1))
    fi
  elif [[ $want == epoch:* ]]; then
    if ((first)); then
      if awk -v a="${want##* }" -v b="${got##* }" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * a)}'; then
        echo "close:   $got (README ${want##* }, within 1e-5)"
      else
        echo "DIFFERS: README '$want', run '$got' (more than a relative 1e-5)"
        failures=$((failures + 1))
      fi
    else
      echo "skipped: $got (README ${want##* }; not compared: runs part after ~150 steps)"
    fi
    first=0
  else
    a=$(awk '{print $3}' <<< "$want") b=$(awk '{print $3}' <<< "$got")
    if awk -v a="$a" -v b="$b" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 0.01)}'; then
      echo "close:   $got (README accuracy $a, within 0.01)"
    else
      echo "DIFFERS: README accuracy $a, run $b (more than 0.01 apart)"
      failures=$((failures + 1))
    fi
  fi
done <<< "$expected"
if ((failures)); then
  echo "check_readme_figures: $failures figure(s) in $readme differ from what the command prints now;" \
       "update the README's Quick start block (or find what changed the results)" >&2
  exit 1
fi
echo "check_readme_figures: the README's figures hold"
