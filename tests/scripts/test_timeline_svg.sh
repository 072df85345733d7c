#!/usr/bin/env bash
# tools/timeline_svg.py: a trace it cannot draw (no such file, empty, not JSON,
# no traceEvents, a step it lacks, a malformed event) ends with status 1 and
# one line "timeline_svg.py: error: ..." on stderr, never a traceback; a
# DataParallel trace and an AdaSum trace are drawn with a legend entry per
# colour, each bucket labelled with its size, every backward layer in the key.
# With DOCS, also: DOCS/timeline.svg is what SCRIPT draws from
# DOCS/timeline-example.json now (a stale picture fails).
# Usage: test_timeline_svg.sh PYTHON SCRIPT [DOCS]
set -uo pipefail
python=$1 script=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_error WHAT EXPECTED_TEXT ARGS...: status 1, exactly one stderr line holding the text
expect_error() {
  local what=$1 text=$2; shift 2
  "$python" "$script" "$@" > "$tmp/out" 2> "$tmp/err"
  local status=$? lines
  lines=$(wc -l < "$tmp/err")
  echo "$what: status $status: $(cat "$tmp/err")"
  [ $status -eq 1 ] || fail "$what: status $status, expected 1"
  [ "$lines" -eq 1 ] || fail "$what: $lines lines on stderr, expected 1"
  grep -q Traceback "$tmp/err" && fail "$what: a traceback"
  grep -qF "timeline_svg.py: error: $text" "$tmp/err" || fail "$what: expected '$text'"
  [ -s "$tmp/out" ] && fail "$what: wrote to stdout"
}

# A two-rank DataParallel step (steps 1 and 2), made by hand: the events
# Timeline::write() writes, with wait/transfer inside each bucket's allreduce.
"$python" - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def X(name, cat, pid, ts, dur, **args):
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": 1, "args": args}
def step(s, adasum=False):
    ev = []
    for r in (0, 1):
        t = 1000 * s + 10 * r
        ev += [X("step", "step", r, t, 900, step=s), X("forward", "compute", r, t, 100, step=s),
               X("backward", "compute", r, t + 100, 500, step=s),
               X("backward CrossEntropyLoss", "backward", r, t + 100, 1, step=s, nodes=1),
               X("backward module.fc2", "backward", r, t + 101, 9, step=s, nodes=1),
               X("backward module", "backward", r, t + 110, 3, step=s, nodes=1),
               X("backward module.fc1", "backward", r, t + 113, 487, step=s, nodes=1),
               X("optimizer step", "compute", r, t + 700, 50, step=s)]
        if adasum:
            ev += [X("adasum", "communication", r, t + 600, 90, step=s),
                   X("adasum level 0", "communication", r, t + 600, 60, step=s, level=0, partner=1 - r),
                   X("adasum gather 0", "communication", r, t + 660, 30, step=s, level=0, partner=1 - r)]
        else:
            for b, (start, size) in enumerate([(110, 1024), (600, 4096)]):
                a = dict(step=s, bucket=b, bytes=size, params=2, blocking=b)
                last = 1000 * s + 10 + start
                ev += [X(f"allreduce bucket {b}", "communication", r, t + start, 1000 * s + 650 - t - start, **a),
                       X(f"wait allreduce bucket {b}", "wait", r, t + start, last - t - start, last_rank=1, **a),
                       X(f"transfer allreduce bucket {b}", "transfer", r, last, 1000 * s + 650 - last, last_rank=1, **a)]
    return ev
for name, adasum in (("dp", False), ("adasum", True)):
    json.dump({"traceEvents": step(1, adasum) + step(2, adasum)}, open(f"{tmp}/{name}.json", "w"))
json.dump({"traceEvents": [{"name": "x", "ph": "X", "ts": 1, "pid": 0}]}, open(f"{tmp}/no_dur.json", "w"))
json.dump({"traceEvents": [{"name": "x", "cat": "c", "ph": "X", "ts": 1, "dur": 2, "pid": 0, "tid": 1,
                            "args": {}}]}, open(f"{tmp}/no_step.json", "w"))
PY

: > "$tmp/empty.json"
printf '{"traceEvents": [\n{"name": "forward",' > "$tmp/cut.json"  # a run stopped while writing
echo '{"otherData": {}}' > "$tmp/no_events.json"
expect_error "no such file" "cannot read $tmp/missing.json: No such file or directory" "$tmp/missing.json"
expect_error "empty file" "$tmp/empty.json is empty" "$tmp/empty.json"
expect_error "cut short" "$tmp/cut.json is not valid JSON (line 2" "$tmp/cut.json"
expect_error "no traceEvents" "$tmp/no_events.json has no traceEvents list" "$tmp/no_events.json"
expect_error "missing step" "$tmp/dp.json has no step 9; its steps are 1 to 2" "$tmp/dp.json" 9
expect_error "step not a number" "STEP must be a whole number, got 'three'" "$tmp/dp.json" three
expect_error "event without dur" "$tmp/no_dur.json: event 0 lacks a name, ts, dur or pid" "$tmp/no_dur.json"
expect_error "no steps" "$tmp/no_step.json has no events with a training step" "$tmp/no_step.json"
expect_error "no file" "no trace file given"
expect_error "unknown option" "unknown option --width" "$tmp/dp.json" --width 3

# expect_svg WHAT FILE STEP TEXT...: status 0, well-formed SVG holding every TEXT
expect_svg() {
  local what=$1 file=$2 step=$3; shift 3
  "$python" "$script" "$file" "$step" --caption "made by test_timeline_svg.sh" > "$tmp/out.svg" 2> "$tmp/err"
  local status=$?
  echo "$what: status $status, $(wc -c < "$tmp/out.svg") bytes of SVG"
  [ $status -eq 0 ] || { fail "$what: status $status: $(cat "$tmp/err")"; return; }
  "$python" -c "import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])" "$tmp/out.svg" ||
    fail "$what: not well-formed XML"
  for text in "$@"; do
    grep -qF -- "$text" "$tmp/out.svg" || fail "$what: no '$text' in the SVG"
  done
}
expect_svg "DataParallel" "$tmp/dp.json" 2 \
  "step 2: DataParallel over 2 ranks, 2 allreduce buckets" \
  ">forward<" ">backward, one box per layer<" ">optimizer step<" ">wait: until the last rank" \
  ">transfer: from the last rank" "bucket 0, 1.0 KiB" "bucket 1, 4.0 KiB" \
  "backward, loss to input: CrossEntropyLoss 1 us" "fc2 9 us" "net ops 3 us" "fc1 487 us" \
  "waiting for rank 1" "made by test_timeline_svg.sh"
expect_svg "AdaSum" "$tmp/adasum.json" 1 \
  "step 1: AdaSum over 2 ranks" ">AdaSum exchange, level L or gather G" ">AdaSum<" ">forward<" \
  ">optimizer step<"
grep -q "allreduce\|bucket" "$tmp/out.svg" && fail "AdaSum: the picture speaks of allreduce buckets"

# The committed picture is what this script draws from the committed trace
# (its <desc> holds the step and caption it was drawn with).
if [ -n "${3:-}" ]; then
  docs=$3
  "$python" - "$python" "$script" "$docs" <<'PY' || fail "docs/timeline.svg is not what $script draws from docs/timeline-example.json"
import html, json, re, subprocess, sys
python, script, docs = sys.argv[1:]
svg = open(f"{docs}/timeline.svg").read()
desc = json.loads(html.unescape(re.search(r"<desc>(.*?)</desc>", svg).group(1)))
again = subprocess.run([python, script, f"{docs}/timeline-example.json", str(desc["step"]),
                        "--caption", desc["caption"]], capture_output=True, text=True, check=True).stdout
print(f"docs/timeline.svg: step {desc['step']}, drawn again: {'the same' if again == svg else 'DIFFERENT'}")
sys.exit(0 if again == svg else 1)
PY
fi

[ $failures -eq 0 ] && echo "all timeline_svg.py checks passed" || { echo "$failures failed" >&2; exit 1; }
