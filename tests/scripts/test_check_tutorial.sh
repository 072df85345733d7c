#!/usr/bin/env bash
# check_tutorial.sh runs the programs of the build that runs it (--bin), not
# <source>/build/bin: a copy of the script in a tree with no build/ folder
# runs a two-command tutorial against BIN: grad_reducer prints 256.0, and
# `dirname build/bin/x` prints BIN.
# Usage: test_check_tutorial.sh SCRIPT BIN
set -euo pipefail
script=$1 bin=$2
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/scripts" "$tree/docs"
cp "$script" "$tree/scripts/check_tutorial.sh"
printf '%s\n' '```sh' 'build/bin/grad_reducer' 'dirname build/bin/x' '```' \
  > "$tree/docs/data-parallel.md"
out=$("$tree/scripts/check_tutorial.sh" --bin "$bin")
echo "$out"
grep -qx "256.0" <<< "$out" || { echo "expected grad_reducer's 256.0" >&2; exit 1; }
grep -qx "$(cd "$bin" && pwd)" <<< "$out" || { echo "expected build/bin/ to become $bin" >&2; exit 1; }
