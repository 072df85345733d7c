"""Sums an ncu report's kernel times by kernel name (GPU sessions).

The report: ncu --csv --metrics gpu__time_duration.sum. ncu runs each kernel
alone with caches flushed, so the total is above a real step's time; what it
gives is each kernel's count and share.
    python3 bench/ncu_summary.py REPORT.csv [TOP]"""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[12] == "gpu__time_duration.sum"]
to_us = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
units = sorted({r[13] for r in rows})
unknown = [u for u in units if u not in to_us]
if unknown:
    sys.exit(f"ncu_summary: unknown time units {unknown}")
total, count = collections.Counter(), collections.Counter()
for r in rows:
    name = r[4].replace("(anonymous namespace)::", "").replace("void ", "").split("(")[0][:80]
    total[name] += float(r[14].replace(",", "")) * to_us[r[13]]
    count[name] += 1
print(f"kernels {len(rows)}, GPU time {sum(total.values()):.1f} us (units {units}; each kernel alone)")
for name, us in total.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 22):
    print(f"{us:8.1f} us {count[name]:4d} x {us / count[name]:6.2f} us  {name}")
