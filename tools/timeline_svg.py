#!/usr/bin/python3
"""Draws one training step of a minidl timeline (--timeline FILE.json) as SVG.

  /usr/bin/python3 tools/timeline_svg.py FILE.json [STEP] [--caption TEXT] > timeline.svg

One band per rank. Its first row is the rank's compute: forward, backward layer
by layer (two shades of orange, so that neighbours stand apart), the
optimizer step. Below it, a DataParallel trace has one row per gradient bucket
("bucket k, its KiB"), each allreduce drawn in two parts: waiting (grey) from
this rank's start until the last rank started it, and transfer (red) from then
until this rank saw it done. An AdaSum trace has one row of AdaSum exchanges
(purple) instead. Under each band, a key lists every backward layer with its
time, since most of them are too narrow to carry a label. Without STEP: the
middle step of the file. Errors (no such file, an empty or malformed file, a
step the file lacks) are one line on stderr and exit status 1.
"""
import html
import json
import sys

# kind -> (colour, legend text); drawn in this order in the legend
KINDS = {
    "forward": ("#8fbbe0", "forward"),
    "backward": ("#f4a261", "backward, one box per layer"),
    "finish": ("#8d6e63", "finish allreduce: wait for the buckets, average, write back"),
    "optimizer": ("#76b776", "optimizer step"),
    "wait": ("#c8c8c8", "wait: until the last rank starts it"),
    "transfer": ("#d1495b", "transfer: from the last rank's start until this rank saw it done"),
    "unsplit": ("#e8a0aa", "allreduce, start to seen done (no wait/transfer split in this file)"),
    "adasum": ("#7b4fa0", "AdaSum exchange, level L or gather G (after the last rank started it)"),
    "other": ("#bbbbbb", "other (hover for the name)"),
}
BACKWARD_ALT = "#e07b39"  # every other layer
PROG = "timeline_svg.py"


class Failure(Exception):
    pass


def parse_args(argv):
    path, step, caption = None, None, ""
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        if a == "--caption":
            if not args:
                raise Failure("--caption needs a text")
            caption = args.pop(0)
        elif a.startswith("-") and a != "-":
            raise Failure(f"unknown option {a} (usage: {PROG} FILE.json [STEP] [--caption TEXT])")
        elif path is None:
            path = a
        elif step is None:
            try:
                step = int(a)
            except ValueError:
                raise Failure(f"STEP must be a whole number, got '{a}'") from None
        else:
            raise Failure(f"too many arguments: '{a}' (usage: {PROG} FILE.json [STEP] [--caption TEXT])")
    if path is None:
        raise Failure(f"no trace file given (usage: {PROG} FILE.json [STEP] [--caption TEXT])")
    return path, step, caption


def load_spans(path):
    """The file's complete events ("ph": "X"), each checked for the fields drawn."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise Failure(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise Failure(f"{path} is not a text file: not a trace from --timeline") from None
    if not text.strip():
        raise Failure(f"{path} is empty (a --timeline file is written whole when training ends)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise Failure(f"{path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise Failure(f"{path} has no traceEvents list: not a Chrome trace from --timeline")
    spans = []
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ok = (isinstance(e.get("name"), str) and isinstance(e.get("ts"), (int, float))
              and isinstance(e.get("dur"), (int, float)) and isinstance(e.get("pid"), int))
        if not ok:
            raise Failure(f"{path}: event {i} lacks a name, ts, dur or pid: {json.dumps(e)[:80]}")
        e.setdefault("cat", "")
        if not isinstance(e.get("args"), dict):
            e["args"] = {}
        spans.append(e)
    if not spans:
        raise Failure(f"{path} has no complete events (\"ph\": \"X\"): nothing to draw")
    return spans


def pick_step(path, spans, step):
    steps = sorted({e["args"]["step"] for e in spans if isinstance(e["args"].get("step"), int)})
    if not steps:
        raise Failure(f"{path} has no events with a training step (args.step): "
                      "was it recorded during Model.train or an example's training loop?")
    if step is None:
        return steps[len(steps) // 2]
    if step not in steps:
        have = f"{steps[0]} to {steps[-1]}" if steps == list(range(steps[0], steps[-1] + 1)) \
            else ", ".join(map(str, steps))
        raise Failure(f"{path} has no step {step}; its steps are {have}")
    return step


def kind_of(e, has_optimizer):
    name, cat = e["name"], e["cat"]
    if name == "forward":
        return "forward"
    if cat == "backward":
        return "backward"
    if name == "optimizer step":
        return "optimizer"
    if name == "reduce and optimizer step":  # the adasum example's mean path has no optimizer event
        return None if has_optimizer else "optimizer"
    if name == "finish allreduce":
        return "finish"
    if cat in ("wait", "transfer"):
        return cat
    if name.startswith("allreduce bucket"):
        return "allreduce"
    if name.startswith("adasum "):
        return "adasum"
    if name in ("step", "backward", "adasum"):  # containers of what is drawn
        return None
    return "other"


def layer_name(e):
    name = e["name"][len("backward "):] if e["name"].startswith("backward ") else e["name"]
    if name == "module":
        return "net ops"  # the network's own ops (relu, flatten) inside DataParallel
    return name[len("module."):] if name.startswith("module.") else name


def adasum_label(name):  # "adasum level 1" -> "L1", "adasum gather 0" -> "G0"
    parts = name.split()
    return (parts[1][0].upper() + parts[2]) if len(parts) == 3 else name


def fmt_us(us):
    return f"{us:.0f} us" if us < 1000 else f"{us / 1000:.2f} ms"


def wrap(items, width_px, char_px=6.2, sep="  ·  "):
    """items joined by sep into lines of at most width_px (at char_px a character)."""
    lines, line = [], ""
    for item in items:
        cand = item if not line else line + sep + item
        if line and len(cand) * char_px > width_px:
            lines.append(line)
            cand = item
        line = cand
    if line:
        lines.append(line)
    return lines


def draw(path, spans, step, caption):
    spans = [e for e in spans if e["args"].get("step") == step]
    ranks = sorted({e["pid"] for e in spans})
    has_opt = {r: any(e["pid"] == r and e["name"] == "optimizer step" for e in spans) for r in ranks}
    drawn = [(e, kind_of(e, has_opt[e["pid"]])) for e in spans]
    drawn = [(e, k) for e, k in drawn if k]
    # What a rank does after its update (summing the loss over ranks, a replica
    # check) is left out of the picture and named under it.
    update_end = {}
    for e, k in drawn:
        if k == "optimizer":
            update_end[e["pid"]] = max(update_end.get(e["pid"], e["ts"]), e["ts"] + e["dur"])
    after = [e for e, k in drawn if e["pid"] in update_end and e["ts"] >= update_end[e["pid"]]]
    drawn = [(e, k) for e, k in drawn if not (e["pid"] in update_end and e["ts"] >= update_end[e["pid"]])]
    if not drawn:
        raise Failure(f"{path}: step {step} has no forward, backward, communication or optimizer "
                      "events to draw")
    def part_of(e):  # what a wait or transfer belongs to: a bucket, or an AdaSum level/gather
        name = e["name"]
        if e["cat"] in ("wait", "transfer"):
            name = name.split(" ", 1)[-1]
        return e["args"].get("bucket"), name if "level" in e["args"] else None
    split = {(e["pid"], part_of(e)) for e, k in drawn if k in ("wait", "transfer")}

    def colour_of(e, k):  # its KINDS entry; None: drawn as its wait and transfer
        if k == "transfer" and "level" in e["args"]:
            return "adasum"
        if k in ("allreduce", "adasum") and (e["pid"], part_of(e)) in split:
            return None
        return "unsplit" if k == "allreduce" else k
    t0 = min(e["ts"] for e, _ in drawn)
    t1 = max(e["ts"] + e["dur"] for e, _ in drawn)
    t1 = t1 if t1 > t0 else t0 + 1
    buckets = {}  # bucket -> bytes
    for e, k in drawn:
        if k == "allreduce" and "bucket" in e["args"]:
            buckets[e["args"]["bucket"]] = e["args"].get("bytes", 0)
    adasum = any(k == "adasum" for _, k in drawn)
    rows = ["compute"] + [("bucket", b) for b in sorted(buckets)] + (["adasum"] if adasum else [])

    left, width, lane, gap = 150, 900, 18, 6
    key_lines = {}
    for r in ranks:
        layers = [e for e, k in drawn if k == "backward" and e["pid"] == r]
        layers.sort(key=lambda e: e["ts"])
        items = [f"{layer_name(e)} {fmt_us(e['dur'])}" for e in layers]
        if items:
            items[0] = "backward, loss to input: " + items[0]
        key_lines[r] = wrap(items, width - 10)

    colours = {colour_of(e, k) for e, k in drawn}
    used = [k for k in KINDS if k in colours]
    out = []
    y = 24
    if adasum:
        what = f"AdaSum over {len(ranks)} ranks (gradients combined after backward, then the optimizer step)"
    elif buckets:
        what = (f"DataParallel over {len(ranks)} ranks, {len(buckets)} allreduce bucket"
                f"{'s' if len(buckets) != 1 else ''} overlapping backward")
    else:
        what = f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''}, no gradient communication"
    out.append(f"<text x='10' y='{y}' font-size='14' font-weight='bold'>minidl timeline, step {step}: "
               f"{html.escape(what)}; {fmt_us(t1 - t0)}</text>")
    y += 12
    # Legend: a swatch and its text per colour, flowing over lines.
    x = 10
    for k in used:
        color, text = KINDS[k]
        w = 16 + 6.0 * len(text) + 18
        if x + w > left + width:
            x, y = 10, y + 16
        if k == "backward":
            out.append(f"<rect x='{x}' y='{y + 4}' width='6' height='11' fill='{color}'/>"
                       f"<rect x='{x + 6}' y='{y + 4}' width='6' height='11' fill='{BACKWARD_ALT}'/>")
        else:
            out.append(f"<rect x='{x}' y='{y + 4}' width='12' height='11' fill='{color}'/>")
        out.append(f"<text x='{x + 16}' y='{y + 13}'>{html.escape(text)}</text>")
        x += w
    y += 16
    if buckets:
        note = ("A rank that starts a bucket early waits (computing on) until the last rank starts it. "
                "MPI moves data only inside MPI calls, so a transfer bar ends when the rank next looks "
                "at it: an upper bound. Hover over a box for its name and time.")
        for line in wrap(note.split(), left + width - 20, 5.8, sep=" "):
            out.append(f"<text x='10' y='{y + 13}' fill='#555'>{html.escape(line)}</text>")
            y += 14
        y += 2
    y += 10

    def x_of(t):
        return left + width * (t - t0) / (t1 - t0)

    for r in ranks:
        out.append(f"<text x='10' y='{y + 13}' font-weight='bold'>rank {r}</text>")
        row_y = {}
        for i, row in enumerate(rows):
            row_y[row] = y + i * lane
            if row == "compute":
                label = "compute"
            elif row == "adasum":
                label = "AdaSum"
            else:
                label = f"bucket {row[1]}, {buckets[row[1]] / 1024:.1f} KiB"
            out.append(f"<text x='{left - 6}' y='{row_y[row] + 12}' text-anchor='end' fill='#444'>"
                       f"{label}</text>")
            out.append(f"<line x1='{left}' x2='{left + width}' y1='{row_y[row] + lane - 2}' "
                       f"y2='{row_y[row] + lane - 2}' stroke='#eee'/>")
        nth_layer = 0
        for e, k in sorted(((e, k) for e, k in drawn if e["pid"] == r), key=lambda p: p[0]["ts"]):
            in_adasum = "level" in e["args"]
            colour = colour_of(e, k)
            if colour is None:
                continue
            color = KINDS[colour][0]
            if in_adasum:
                row = "adasum"
            elif "bucket" in e["args"]:
                row = ("bucket", e["args"]["bucket"])
            else:
                row = "compute"
            if k == "backward":
                color = color if nth_layer % 2 == 0 else BACKWARD_ALT
                nth_layer += 1
            if row not in row_y:
                continue
            x, w = x_of(e["ts"]), max(1.0, x_of(e["ts"] + e["dur"]) - x_of(e["ts"]))
            top = row_y[row]
            tip = f"{e['name']}: {fmt_us(e['dur'])}"
            if k == "wait" and "last_rank" in e["args"]:
                tip += f", waiting for rank {e['args']['last_rank']}"
            out.append(f"<rect x='{x:.1f}' y='{top}' width='{w:.1f}' height='{lane - 4}' fill='{color}'>"
                       f"<title>{html.escape(tip)}</title></rect>")
            if k == "backward":
                label = layer_name(e)
            elif k == "adasum" or (k == "transfer" and in_adasum):
                label = adasum_label(e["name"].split(" ", 1)[-1] if k == "transfer" else e["name"])
            elif k == "wait":
                label = f"wait {fmt_us(e['dur'])}"
            elif k == "transfer":
                label = f"transfer {fmt_us(e['dur'])}"
            elif k == "optimizer":
                label = "optimizer"
            elif k == "finish":
                label = "finish"
            else:
                label = e["name"]
            if w > 6.2 * len(label) + 4:
                fill = "white" if k in ("transfer", "adasum") else "black"
                out.append(f"<text x='{x + 2:.1f}' y='{top + 11}' fill='{fill}'>{html.escape(label)}</text>")
        y += len(rows) * lane
        for line in key_lines[r]:
            out.append(f"<text x='{left}' y='{y + 11}' fill='#555' font-size='10'>{html.escape(line)}</text>")
            y += 13
        y += gap + 8
    # Time axis.
    out.append(f"<line x1='{left}' x2='{left + width}' y1='{y}' y2='{y}' stroke='#888'/>")
    for i in range(6):
        t = t0 + (t1 - t0) * i / 5
        out.append(f"<line x1='{x_of(t):.1f}' x2='{x_of(t):.1f}' y1='{y}' y2='{y + 4}' stroke='#888'/>")
        out.append(f"<text x='{x_of(t):.1f}' y='{y + 16}' text-anchor='middle' fill='#555'>"
                   f"{(t - t0) / 1000:.2f} ms</text>")
    y += 22
    if after:
        names = {}
        for e in after:
            names.setdefault(e["name"], []).append(f"rank {e['pid']} {fmt_us(e['dur'])}")
        text = "After the optimizer step, not drawn: " + "; ".join(
            f"{name} ({', '.join(v)})" for name, v in names.items())
        for line in wrap(text.split(), left + width - 20, 5.4, sep=" "):
            out.append(f"<text x='10' y='{y + 12}' fill='#555' font-size='10'>{html.escape(line)}</text>")
            y += 13
    if caption:
        for line in wrap(caption.split(), left + width - 20, 5.4, sep=" "):
            out.append(f"<text x='10' y='{y + 12}' fill='#555' font-size='10'>{html.escape(line)}</text>")
            y += 13
    height = y + 8
    head = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{left + width + 20}' height='{height}' "
            "font-family='sans-serif' font-size='11'>",
            # how it was drawn, so that a test can draw it again and compare
            f"<desc>{html.escape(json.dumps({'drawn_by': PROG, 'step': step, 'caption': caption}))}</desc>",
            "<rect width='100%' height='100%' fill='white'/>"]
    return "\n".join(head + out + ["</svg>"])


def main(argv):
    try:
        path, step, caption = parse_args(argv)
        spans = load_spans(path)
        step = pick_step(path, spans, step)
        svg = draw(path, spans, step, caption)
    except Failure as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    print(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
