#!/usr/bin/python3
"""Draws the loss curves of several runs on one plot, as SVG.

  python3 tools/curves_svg.py LABEL=RUN.csv [LABEL=RUN.csv ...] [--column loss]
                              [--caption TEXT] > curves.svg
  python3 tools/curves_svg.py --report LABEL=RUN.csv LABEL=RUN.csv ...

Each RUN.csv is a run's --history file (step,epoch,loss,accuracy per step).
One line per run, in its own colour, over the global step; a legend names
each with its last value. --column accuracy plots that column instead.
--report prints, instead of a picture, how far each later run is from the
first: the largest relative difference of the column over their common
steps, and the first step where it exceeds 1e-5 ("never" if none).
Errors (no such file, a file without the column or without rows, an
argument that is not LABEL=FILE) are one line "curves_svg.py: error: ..." on
stderr and exit status 1, never a traceback.
"""
import csv
import html
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b"]
PROG = "curves_svg.py"
W, H, LEFT, RIGHT, TOP, BOTTOM = 800, 360, 60, 240, 30, 40


class Failure(Exception):
    pass


def read(label, path, column):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise Failure(f"{path}: {e.strerror}")
    if not rows or column not in rows[0] or "step" not in rows[0]:
        raise Failure(f"{path}: expected a --history CSV with columns step and {column}, "
                      f"got {'no rows' if not rows else ', '.join(rows[0])}")
    try:
        return label, [(int(r["step"]), float(r[column])) for r in rows]
    except ValueError:
        raise Failure(f"{path}: a step or {column} that is not a number")


def draw(series, column, caption):
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)
    y0, y1 = min(ys), max(max(ys), min(ys) + 1e-9)
    px = lambda x: LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT)
    py = lambda y: TOP + (y1 - y) / (y1 - y0) * (H - TOP - BOTTOM)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{LEFT}" y="18" font-size="14">{html.escape(caption)}</text>',
           f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>',
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>',
           f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}" text-anchor="middle">step</text>',
           f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})" '
           f'text-anchor="middle">{html.escape(column)}</text>']
    for v, anchor in ((x0, "start"), (x1, "end")):
        out.append(f'<text x="{px(v):.1f}" y="{H - BOTTOM + 14}" text-anchor="{anchor}">{v}</text>')
    for v in (y0, y1):
        out.append(f'<text x="{LEFT - 4}" y="{py(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
    for i, (label, pts) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline class="run" fill="none" stroke="{colour}" stroke-width="1.5" '
                   f'points="{points}"><title>{html.escape(label)}</title></polyline>')
        ly = TOP + 16 * i + 6
        out.append(f'<line x1="{W - RIGHT + 12}" y1="{ly}" x2="{W - RIGHT + 32}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="3"/>')
        out.append(f'<text x="{W - RIGHT + 36}" y="{ly + 4}">{html.escape(label)}: {pts[-1][1]:.4g}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def report(series, column):
    (first, base), lines = series[0], []
    for label, pts in series[1:]:
        pairs = list(zip(base, pts))
        rel = [abs(b - a) / max(abs(a), 1e-30) for (_, a), (_, b) in pairs]
        apart = next((step for ((step, _), _), r in zip(pairs, rel) if r > 1e-5), None)
        lines.append(f"{label} against {first}: {column} over {len(pairs)} steps, largest relative "
                     f"difference {max(rel):.1e}, first step apart by more than 1e-5: "
                     f"{apart if apart is not None else 'never'}\n")
    return "".join(lines)


def main(argv):
    column, caption, specs, reporting = "loss", "", [], False
    args = iter(argv)
    for a in args:
        if a == "--report":
            reporting = True
            continue
        if a in ("--column", "--caption"):
            value = next(args, None)
            if value is None:
                raise Failure(f"{a}: expected a value")
            column, caption = (value, caption) if a == "--column" else (column, value)
        elif "=" in a and not a.startswith("-"):
            specs.append(a.split("=", 1))
        else:
            raise Failure(f"expected LABEL=RUN.csv, --column, --caption or --report, got '{a}'")
    if not specs:
        raise Failure("expected at least one LABEL=RUN.csv")
    series = [read(label, path, column) for label, path in specs]
    if reporting and len(series) < 2:
        raise Failure("--report: expected at least two LABEL=RUN.csv")
    sys.stdout.write(report(series, column) if reporting else
                     draw(series, column, caption or f"{column} per step"))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Failure as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
