#!/usr/bin/python3
"""The model-zoo examples against their PyTorch twins (tests/examples/twin_<example>.py):
for each run in tests/reference/<example>_losses.json, runs build/bin/<example> with
the run's arguments (from the repository root) and compares the numbers its output
gives after each "<name> " of the run's loss names ("loss" unless it says) with the
twin's, to 1e-4 relative. Needs no PyTorch. --device DEVICE adds "--device DEVICE" to
every run, --data EXAMPLE=DIR adds "--data DIR" to that example's (the GPU session's).
    tests/examples/check_twins.py [--device DEVICE] [--data EXAMPLE=DIR]... BIN_DIR EXAMPLE..."""
import json
import os
import re
import subprocess
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
args, extra, data = sys.argv[1:], [], {}
while args and args[0] in ("--device", "--data"):
    if args[0] == "--device":
        extra += ["--device", args[1]]
    else:
        example, _, folder = args[1].partition("=")
        data[example] = ["--data", folder]
    args = args[2:]
bin_dir, failed = args[0], False
for example in args[1:]:
    file = json.load(open(os.path.join(root, "tests", "reference", example + "_losses.json")))
    for run in file["runs"]:
        command = [os.path.join(bin_dir, example)] + run["args"] + extra + data.get(example, [])
        out = subprocess.run(command, cwd=root,
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            print(example, run["what"], "failed:", out.stdout[-2000:], out.stderr[-2000:])
            failed = True
            continue
        names = run.get("names", ["loss"])
        pattern = r"\b(%s) ([-+0-9.eE]+)" % "|".join(names)
        got = [float(v) for _, v in re.findall(pattern, out.stdout)][:len(run["losses"])]
        want = run["losses"]
        worst = max((abs(g - w) / abs(w) for g, w in zip(got, want)), default=float("inf"))
        ok = len(got) == len(want) and worst <= 1e-4
        print("%s (%s)%s: %d losses vs PyTorch %s, largest relative difference %.2e: %s"
              % (example, run["what"], " on " + extra[1] if extra else "", len(got), file["torch"],
                 worst, "ok" if ok else "FAILED"))
        if not ok:
            print("  minidl: ", got, "\n  PyTorch:", want)
        failed |= not ok
sys.exit(1 if failed else 0)
