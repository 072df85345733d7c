#!/usr/bin/env bash
# Installs the Debian packages minidl needs (when run as root and any is
# missing), so the README's two commands work on a fresh Debian 12 machine.
set -euo pipefail
# clang-14, its sanitizer and libFuzzer runtimes and OpenMP: scripts/check_sanitizers.sh;
# iproute2: the two-namespace test (tests/parallel/run_netns.sh); qemu-user:
# the portable build on older CPUs (tests/examples/check_portable.sh).
packages=(build-essential cmake libopenblas-openmp-dev libopenmpi-dev openmpi-bin
          doctest-dev zlib1g-dev nlohmann-json3-dev libcli11-dev dataset-fashion-mnist npm python3 bible-kjv libpng-dev
          libdnnl-dev
          clang-14 libclang-rt-14-dev libomp-14-dev iproute2 qemu-user)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come from Node's own installer instead of Debian's package.
if [[ " ${missing[*]} " == *" npm "* ]] && command -v npm >/dev/null; then
  missing=("${missing[@]/npm}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
