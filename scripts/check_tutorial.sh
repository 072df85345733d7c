#!/usr/bin/env bash
# Usage: scripts/check_tutorial.sh [--bin DIR] [DOC]
# Runs every command of the `sh` blocks in DOC (default docs/data-parallel.md),
# in order, in one shell, from the repository root; fails on the first that
# fails. The commands name programs as build/bin/NAME (an in-tree build);
# with --bin DIR they run DIR/NAME instead (ctest passes its own build's).
# A `#> TEXT` line after a command is what it must print: some line of its
# output holds TEXT, its numbers as printed or, with `#> ~TOL TEXT`, within a
# relative TOL; `?` is any number (scripts/check_expect.py). Other `#` lines
# are comments. A line ending in `\` goes on on the next. A command ending in
# `# refused` must fail (exit non-zero), and its `#>` lines are its error's.
set -euo pipefail
bin=build/bin
if [[ ${1:-} == --bin ]]; then
  [[ -d ${2:-} ]] || { echo "check_tutorial: --bin expects a folder, got '${2:-}'" >&2; exit 1; }
  bin=$(cd "$2" && pwd)
  shift 2
fi
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
doc=${1:-docs/data-parallel.md}
commands=$(awk '/^```sh$/ {on=1; next} /^```$/ {on=0; next} !on {next}
  { line = buf $0; buf = "" }
  line ~ /\\$/ { sub(/\\$/, " ", line); buf = line; next }
  (line ~ /^#> / || line !~ /^#/) && NF { print line }' "$doc")
[[ -n "$commands" ]] || { echo "check_tutorial: no commands in $doc" >&2; exit 1; }
log=/tmp/minidl-tutorial-$$.log
n=0 checked=0
while IFS= read -r cmd; do
  if [[ $cmd == "#> "* ]]; then  # what the command before it printed
    if ! python3 "$here/check_expect.py" "$log" "${cmd#"#> "}"; then
      echo "check_tutorial: command $n did not print what $doc says after it" >&2
      exit 1
    fi
    checked=$((checked + 1))
    continue
  fi
  n=$((n + 1))
  cmd=${cmd//build\/bin\//$bin/}
  echo "==> $cmd"
  if [[ $cmd == export* ]]; then  # shell state for the commands after it
    eval "$cmd"
    continue
  fi
  if [[ $cmd == *"# refused" ]]; then
    if timeout 300 bash -c "$cmd" < /dev/null > "$log" 2>&1; then
      echo "check_tutorial: command $n was to be refused, and ran: $cmd" >&2
      exit 1
    fi
  elif ! timeout 300 bash -c "$cmd" < /dev/null > "$log" 2>&1; then
    tail -20 "$log"
    echo "check_tutorial: command $n failed: $cmd" >&2
    exit 1
  fi
  tail -2 "$log"
done <<< "$commands"
rm -f "$log"
echo "check_tutorial: all $n commands ran, $checked printed line(s) as the text says"
