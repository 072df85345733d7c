#!/usr/bin/env bash
# Usage: scripts/check_tutorial.sh [--bin DIR] [DOC]
# Runs every command of the `sh` blocks in DOC (default docs/data-parallel.md),
# in order, in one shell, from the repository root; fails on the first that
# fails. The commands name programs as build/bin/NAME (an in-tree build);
# with --bin DIR they run DIR/NAME instead (ctest passes its own build's).
set -euo pipefail
bin=build/bin
if [[ ${1:-} == --bin ]]; then
  [[ -d ${2:-} ]] || { echo "check_tutorial: --bin expects a folder, got '${2:-}'" >&2; exit 1; }
  bin=$(cd "$2" && pwd)
  shift 2
fi
cd "$(dirname "$0")/.."
doc=${1:-docs/data-parallel.md}
commands=$(awk '/^```sh$/ {on=1; next} /^```$/ {on=0} on && !/^#/ && NF' "$doc")
[[ -n "$commands" ]] || { echo "check_tutorial: no commands in $doc" >&2; exit 1; }
n=0
while IFS= read -r cmd; do
  n=$((n + 1))
  cmd=${cmd//build\/bin\//$bin/}
  echo "==> $cmd"
  if [[ $cmd == export* ]]; then  # shell state for the commands after it
    eval "$cmd"
    continue
  fi
  if ! eval "timeout 300 $cmd" < /dev/null > /tmp/minidl-tutorial-$$.log 2>&1; then
    tail -20 /tmp/minidl-tutorial-$$.log
    echo "check_tutorial: command $n failed: $cmd" >&2
    exit 1
  fi
  tail -2 /tmp/minidl-tutorial-$$.log
done <<< "$commands"
rm -f /tmp/minidl-tutorial-$$.log
echo "check_tutorial: all $n commands ran"
