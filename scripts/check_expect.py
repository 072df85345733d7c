#!/usr/bin/env python3
"""Checks that a command's output holds an expected line, numbers within a tolerance.

  check_expect.py LOG 'EXPECTED'

EXPECTED is a `#>` line of a tutorial's sh block (scripts/check_tutorial.sh),
without the `#> `: text and numbers, optionally starting with `~TOL ` (the
relative tolerance of its numbers, default 0: as printed). Some line of LOG
must hold the text, with any run of spaces matching any other, and at each
number a number within TOL of it (|got - want| <= TOL |want|); a `?` stands
for any number. Exit 0 when one does; else 1, printing the expectation and
the output lines that hold its text with other numbers.
"""
import re
import sys

NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def pattern(expected):
    """The regex of an expected line (numbers and `?` captured) and its numbers (None for `?`)."""
    parts, wants = [], []
    for token in re.split(rf"(\s+|(?<![\w.]){NUMBER}|\?)", expected):
        if not token:
            continue
        if token.isspace():
            parts.append(r"\s+")
        elif token == "?" or re.fullmatch(NUMBER, token):
            parts.append(f"({NUMBER})")
            wants.append(None if token == "?" else float(token))
        else:
            parts.append(re.escape(token))
    return re.compile("".join(parts)), wants


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_expect.py LOG 'EXPECTED'")
    log, expected = sys.argv[1], sys.argv[2].strip()
    tol = 0.0
    m = re.match(r"~(\S+)\s+(.*)", expected)
    if m:
        tol, expected = float(m.group(1)), m.group(2)
    regex, wants = pattern(expected)
    near = []
    with open(log, errors="replace") as f:
        for line in f:
            for hit in regex.finditer(line):
                got = [float(g) for g in hit.groups()]
                if all(w is None or abs(g - w) <= tol * abs(w) for g, w in zip(got, wants)):
                    return 0
                if line.rstrip("\n") not in near:
                    near.append(line.rstrip("\n"))
    print(f"check_expect: no output line holds '{expected}' (numbers within {tol:g})", file=sys.stderr)
    for line in near[:5]:
        print(f"  the text with other numbers: {line}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
