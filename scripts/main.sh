#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/bin/two_layer_demo "$@"
