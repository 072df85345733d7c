#!/usr/bin/env bash
# check_tutorial.sh runs the programs of the build that runs it (--bin), not
# <source>/build/bin: a copy of the script in a tree with no build/ folder
# runs a two-command tutorial against BIN: grad_reducer prints 256.0, and
# `dirname build/bin/x` prints BIN. A `#>` line the output holds passes; one
# it does not hold (255.9) fails the run, naming it.
# Usage: test_check_tutorial.sh SCRIPT BIN
set -euo pipefail
script=$1 bin=$2
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/scripts" "$tree/docs"
cp "$script" "$tree/scripts/check_tutorial.sh"
cp "$(dirname "$script")/check_expect.py" "$tree/scripts/"
printf '%s\n' '```sh' 'build/bin/grad_reducer' '#> 256.0' '#> ~1e-3 256.1' 'dirname build/bin/x' '```' \
  > "$tree/docs/data-parallel.md"
out=$("$tree/scripts/check_tutorial.sh" --bin "$bin")
echo "$out"
grep -qx "256.0" <<< "$out" || { echo "expected grad_reducer's 256.0" >&2; exit 1; }
grep -qx "$(cd "$bin" && pwd)" <<< "$out" || { echo "expected build/bin/ to become $bin" >&2; exit 1; }
grep -q "2 printed line(s) as the text says" <<< "$out" || { echo "expected 2 checked lines" >&2; exit 1; }
printf '%s\n' '```sh' 'build/bin/grad_reducer' '#> 255.9' '```' > "$tree/docs/data-parallel.md"
if err=$("$tree/scripts/check_tutorial.sh" --bin "$bin" 2>&1); then
  echo "expected a failure for 255.9" >&2
  exit 1
fi
grep -q "no output line holds '255.9'" <<< "$err" || { echo "expected the failure to name 255.9: $err" >&2; exit 1; }
