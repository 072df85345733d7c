#!/usr/bin/python3
"""Draws one training step of a minidl timeline (--timeline FILE.json) as SVG.

  /usr/bin/python3 tools/timeline_svg.py FILE.json [STEP] > timeline.svg

One band per rank: per-layer backward spans on the first line, forward and
the optimizer step beside them, and each allreduce bucket on its own line
below, so the overlap of communication with backward is visible at a glance.
"""
import json
import sys

COLORS = {"forward": "#8fbbe0", "backward": "#f4a261", "optimizer step": "#9bd39b",
          "communication": "#d1495b", "check": "#999999"}


def main():
    path = sys.argv[1]
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    spans = [e for e in events if e.get("ph") == "X"]
    steps = sorted({e["args"].get("step", 0) for e in spans})
    step = int(sys.argv[2]) if len(sys.argv) > 2 else steps[len(steps) // 2]
    spans = [e for e in spans if e["args"].get("step") == step and e["name"] != "step"]
    ranks = sorted({e["pid"] for e in spans})
    t0 = min(e["ts"] for e in spans)
    t1 = max(e["ts"] + e["dur"] for e in spans)
    width, left, lane = 900, 90, 18

    def lanes_of(rank):  # compute lane 0, then one lane per communication row
        rows = sorted({e["tid"] for e in spans if e["pid"] == rank and e["cat"] == "communication"
                       and e["name"].startswith(("allreduce", "adasum"))})
        return {tid: i + 1 for i, tid in enumerate(rows)}

    heights = {r: (len(lanes_of(r)) + 1) * lane + 24 for r in ranks}
    total = 40 + sum(heights.values()) + 30
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width + left + 20}' height='{total}' "
           "font-family='sans-serif' font-size='11'>", "<rect width='100%' height='100%' fill='white'/>",
           f"<text x='{left}' y='18' font-size='14'>minidl timeline, step {step}: "
           f"{(t1 - t0) / 1000:.2f} ms; backward per layer (orange), allreduce buckets (red)</text>"]
    y = 34

    def x_of(t):
        return left + width * (t - t0) / (t1 - t0)

    for r in ranks:
        lanes = lanes_of(r)
        out.append(f"<text x='8' y='{y + 14}' font-weight='bold'>rank {r}</text>")
        for e in spans:
            if e["pid"] != r:
                continue
            name, cat = e["name"], e["cat"]
            if name in ("forward", "optimizer step"):
                row, color = 0, COLORS[name]
            elif cat == "backward":
                row, color = 0, COLORS["backward"]
            elif e["tid"] in lanes:
                row, color = lanes[e["tid"]], COLORS["communication"]
            else:
                continue
            x, w = x_of(e["ts"]), max(1.0, x_of(e["ts"] + e["dur"]) - x_of(e["ts"]))
            top = y + row * lane
            label = name.replace("backward ", "").replace("module.", "")
            out.append(f"<rect x='{x:.1f}' y='{top}' width='{w:.1f}' height='{lane - 3}' fill='{color}' "
                       f"stroke='white' stroke-width='0.5'><title>{name} {e['dur']:.0f} us</title></rect>")
            if w > 6 * len(label):
                out.append(f"<text x='{x + 2:.1f}' y='{top + 11}'>{label}</text>")
        for tid, row in lanes.items():
            out.append(f"<text x='8' y='{y + row * lane + 11}' fill='#555'>comm {row}</text>")
        y += heights[r]
    for i in range(6):
        t = t0 + (t1 - t0) * i / 5
        out.append(f"<text x='{x_of(t):.1f}' y='{total - 10}' text-anchor='middle' fill='#555'>"
                   f"{(t - t0) / 1000:.1f} ms</text>")
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
