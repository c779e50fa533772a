#!/usr/bin/env python3
"""Total duration per kernel name and T from `ncu --csv --metrics gpu__time_duration.sum
bench_train_step --profile` (three steps at T = 40, then three at T = 256): microseconds per step.
With a second csv, the two side by side.   ncu-kernel-summary.py NEW.csv [BASE.csv]"""
import csv, sys, collections

def kernel_name(full):
    """'void ns::<unnamed>::name<4, true>(args)' -> 'name'"""
    full = full.removeprefix("void ")
    depth, cut = 0, len(full)
    for i, ch in enumerate(full):  # the first '(' or '<' outside the namespace's '<unnamed>'
        if full.startswith("<unnamed>", i) or full.startswith("(anonymous namespace)", i):
            continue
        if ch in "(<" and not full[:i].endswith("::") and not full[i:].startswith("<unnamed>"):
            cut = i
            break
    return full[:cut].split("::")[-1][:40]


def load(path):
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"'))]
    half = len(rows) // 2
    out = {}
    for label, part in (("T=40", rows[:half]), ("T=256", rows[half:])):
        total = collections.defaultdict(float)
        for r in part:
            name = kernel_name(r["Kernel Name"])
            total[name] += float(r["Metric Value"].replace(",", "")) / 1000 / 3  # ns -> us per step
        out[label] = total
    return out

runs = [load(p) for p in sys.argv[1:]]
for label in ("T=40", "T=256"):
    names = sorted(set().union(*(r[label] for r in runs)), key=lambda n: -runs[0][label].get(n, 0))
    for n in names:
        print(f"{label:6} {n:40}" + "".join(f" {r[label].get(n, 0):9.1f}" for r in runs))
    print(f"{label:6} {'total':40}" + "".join(f" {sum(r[label].values()):9.1f}" for r in runs))
