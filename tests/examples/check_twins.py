#!/usr/bin/python3
"""The model-zoo examples against their PyTorch twins (tests/examples/twin_<example>.py):
runs build/bin/<example> with the arguments its tests/reference/<example>_losses.json
names (from the repository root) and compares every printed "loss X" with the twin's
losses, to 1e-4 relative. Needs no PyTorch.
    tests/examples/check_twins.py BIN_DIR EXAMPLE..."""
import json
import os
import re
import subprocess
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
bin_dir, failed = sys.argv[1], False
for example in sys.argv[2:]:
    want = json.load(open(os.path.join(root, "tests", "reference", example + "_losses.json")))
    out = subprocess.run([os.path.join(bin_dir, example)] + want["args"], cwd=root, capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        print(example, "failed:", out.stdout[-2000:], out.stderr[-2000:])
        failed = True
        continue
    got = [float(v) for v in re.findall(r"\bloss ([-+0-9.eE]+)", out.stdout)][:len(want["losses"])]
    worst = max((abs(g - w) / abs(w) for g, w in zip(got, want["losses"])), default=float("inf"))
    ok = len(got) == len(want["losses"]) and worst <= 1e-4
    print("%s: %d losses vs PyTorch %s, largest relative difference %.2e: %s"
          % (example, len(got), want["torch"], worst, "ok" if ok else "FAILED"))
    if not ok:
        print("  minidl: ", got, "\n  PyTorch:", want["losses"])
    failed |= not ok
sys.exit(1 if failed else 0)
