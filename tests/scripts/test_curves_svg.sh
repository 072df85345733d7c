#!/usr/bin/env bash
# tools/curves_svg.py: runs it cannot draw (no such file, a CSV without the
# column or without rows, a bad argument, none given) end with status 1 and
# one line "curves_svg.py: error: ..." on stderr, never a traceback; two
# hand-made runs are drawn as two lines with every step a point, each in the
# legend with its last value, the axis labelled with the lowest and highest
# value. With DOCS, also: each DOCS/lab/*.svg is what SCRIPT draws now from
# the CSVs and caption its first line names (a stale picture fails).
# Usage: test_curves_svg.sh PYTHON SCRIPT [DOCS]
set -uo pipefail
python=$1 script=$(realpath "$2") docs=${3:-}
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
  grep -q "^curves_svg.py: error: " "$tmp/err" && grep -qF -- "$text" "$tmp/err" ||
    fail "$what: expected 'curves_svg.py: error: ...$text'"
  [ -s "$tmp/out" ] && fail "$what: wrote to stdout"
}

printf 'step,epoch,loss,accuracy\n1,1,2.5,0.1\n2,1,2.0,0.3\n3,1,1.5,0.5\n' > "$tmp/a.csv"
printf 'step,epoch,loss,accuracy\n1,1,2.4,0.1\n2,1,2.1,0.2\n3,1,1.9,0.4\n4,1,0.5,0.9\n' > "$tmp/b.csv"
printf 'step,epoch,accuracy\n1,1,0.5\n' > "$tmp/noloss.csv"
printf 'step,epoch,loss,accuracy\n' > "$tmp/empty.csv"
expect_error "no file" "$tmp/none.csv: No such file or directory" one="$tmp/none.csv"
expect_error "no loss column" "expected a --history CSV with columns step and loss, got step, epoch, accuracy" \
  x="$tmp/noloss.csv"
expect_error "no rows" "got no rows" x="$tmp/empty.csv"
expect_error "bad argument" "expected LABEL=RUN.csv, --column, --caption or --report, got 'a.csv'" a.csv
expect_error "report of one run" "--report: expected at least two LABEL=RUN.csv" --report x="$tmp/a.csv"
expect_error "nothing" "expected at least one LABEL=RUN.csv"

"$python" "$script" "1 rank=$tmp/a.csv" "2 ranks=$tmp/b.csv" --caption "two runs" > "$tmp/out.svg" ||
  fail "drawing two runs"
"$python" - "$tmp/out.svg" <<'PY' || fail "the two runs' picture"
import re, sys
svg = open(sys.argv[1]).read()
lines = re.findall(r'<polyline class="run"[^>]*points="([^"]*)"><title>([^<]*)</title>', svg)
assert [(len(p.split()), t) for p, t in lines] == [(3, "1 rank"), (4, "2 ranks")], lines
for legend in ("1 rank: 1.5", "2 ranks: 0.5", ">two runs<", ">0.5<", ">2.5<", ">step<", ">loss<"):
    assert legend in svg, legend
print("two runs drawn: 3 and 4 points, legends with last values, axis 0.5 to 2.5")
PY

# --report: b against a over their 3 common steps: 2.4/2.5, 2.1/2.0, 1.9/1.5
# differ by 0.04, 0.05 and 0.2667 relative; apart from step 1 on. a against
# itself: never apart.
want="b against a: loss over 3 steps, largest relative difference 2.7e-01, first step apart by more than 1e-5: 1
a again against a: loss over 3 steps, largest relative difference 0.0e+00, first step apart by more than 1e-5: never"
got=$("$python" "$script" --report a="$tmp/a.csv" b="$tmp/b.csv" "a again=$tmp/a.csv")
[ "$got" = "$want" ] && echo "--report: $got" || fail "--report printed: $got"

if [ -n "$docs" ]; then
  for svg in "$docs"/lab/*.svg; do
    [ -e "$svg" ] || continue
    # well-formed XML (a browser or GitHub shows nothing otherwise)
    "$python" -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$svg" ||
      fail "$svg is not well-formed XML"
    # first line: <!-- curves_svg.py ARGS --> with ARGS relative to DOCS/lab,
    # each hyphen written \- (an XML comment may not hold --)
    args=$(head -n 1 "$svg" | sed -n 's/^<!-- curves_svg.py \(.*\) -->$/\1/p')
    [ -n "$args" ] || { fail "$svg: no '<!-- curves_svg.py ARGS -->' first line"; continue; }
    (cd "$docs/lab" && eval "\"$python\" \"$script\" $args") > "$tmp/redrawn.svg" ||
      { fail "$svg: redrawing failed"; continue; }
    diff -q <(tail -n +2 "$svg") "$tmp/redrawn.svg" >/dev/null ||
      fail "$svg is stale: not what curves_svg.py draws from its CSVs now"
    echo "$svg: what curves_svg.py draws now"
  done
fi
[ $failures -eq 0 ] && echo "all curves_svg checks passed"
exit $((failures > 0))
