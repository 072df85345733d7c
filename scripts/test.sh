#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the
# whole suite (unit suites, multi-rank suites under mpirun, the
# find_package(minidl) consumer check) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/get_mnist.sh
scripts/get_text.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
