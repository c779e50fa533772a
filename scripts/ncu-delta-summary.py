#!/usr/bin/env python3
"""Mean duration of each recurrence kernel per T from `ncu --csv --metrics gpu__time_duration.sum
-k regex:delta_ bench_train_step --profile` (three steps at T = 40, then three at T = 256)."""
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
half = len(rows) // 2
for label, part in (("T=40", rows[:half]), ("T=256", rows[half:])):
    times = collections.defaultdict(list)
    for r in part:
        name = r["Kernel Name"].split("(")[0].split("<")[0].split("::")[-1]
        times[name].append(float(r["Metric Value"].replace(",", "")))
    for name, t in sorted(times.items()):
        print(f"{label:6} {name:34} {len(t):3} launches, mean {sum(t) / len(t):9.2f} us")
