#!/usr/bin/env bash
# The model-zoo examples resume exactly: a run stopped halfway and resumed
# from its --save file prints the same losses, to the last digit, as the run
# that went straight through. Small settings, and a tiny MNIST-shaped set
# (tests/tiny_mnist.py) for the image models, whose evaluation would
# otherwise read 10,000 images per run (minutes under ASan); from the
# repository root.
# usage: check_zoo_resume.sh BIN_DIR
set -euo pipefail
bin=$1 work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$(dirname "$0")/../tiny_mnist.py" "$work/tiny" 64 16 0
fail=0
# check NAME "FLAGS FOR THE WHOLE RUN" "FLAGS TO STOP HALFWAY" "FLAGS TO FINISH" COMMON...
check() {
  local name=$1 whole=$2 half=$3 rest=$4
  shift 4
  "$bin/$name" "$@" $whole > "$work/$name.whole"
  "$bin/$name" "$@" $half --save "$work/$name.state" > "$work/$name.half"
  "$bin/$name" "$@" $rest --resume "$work/$name.state" > "$work/$name.rest"
  local want got
  want=$(grep -E "loss" "$work/$name.whole" | tail -n 2)
  got=$(grep -E "loss" "$work/$name.rest" | tail -n 2)
  if [[ "$want" == "$got" && -n "$want" ]]; then
    echo "$name: resumed run ends as the straight one: $(tr '\n' ' ' <<< "$got")"
  else
    echo "$name: FAILED"; echo "  straight: $want"; echo "  resumed:  $got"; fail=1
  fi
}
check char_lstm "--steps 4" "--steps 2" "--steps 4" --batch 4 --seq 16 --hidden 16 --log-every 1 --sample 0
check tiny_gpt "--steps 4" "--steps 2" "--steps 4" --batch 4 --log-every 1 --sample 0
check dcgan_mnist "--epochs 2" "--epochs 1" "--epochs 2" --data "$work/tiny" --width 4 --batch 8 --steps 2 --log-every 1 --out "$work"
check resnet_fashion "--epochs 2" "--epochs 1" "--epochs 2" --data "$work/tiny" --batch 8 --steps 2 --log-every 1
exit $fail
