#!/usr/bin/env python3
"""Kernel time per step by kernel name and T, from `ncu --csv --metrics gpu__time_duration.sum
bench_train_step --profile` (three steps at T = 40, then three at T = 256): microseconds per step and
launches per step; with a second csv, the two side by side. A kernel's time per launch is its time
per step over its launches (deltanet's recurrence kernels: one launch per layer).
    ncu-kernel-summary.py NEW.csv [BASE.csv]"""
import csv, sys, collections

steps = 3  # per T in `bench_train_step --profile`


def kernel_name(full):
    """'void ns::<unnamed>::name<4, true>(args)' -> 'name'"""
    for namespace in ("<unnamed>::", "(anonymous namespace)::"):
        full = full.replace(namespace, "")
    full = full.removeprefix("void ")
    cut = min((i for i in (full.find("("), full.find("<")) if i >= 0), default=len(full))
    return full[:cut].split("::")[-1][:40]


def load(path):
    """{T label: {name: (us per step, launches per step)}}"""
    rows = [r for r in csv.DictReader(l for l in open(path) if l.startswith('"'))]
    half = len(rows) // 2
    out = {}
    for label, part in (("T=40", rows[:half]), ("T=256", rows[half:])):
        time, launches = collections.defaultdict(float), collections.defaultdict(int)
        for r in part:
            name = kernel_name(r["Kernel Name"])
            time[name] += float(r["Metric Value"].replace(",", "")) / 1000 / steps  # ns -> us per step
            launches[name] += 1
        out[label] = {n: (time[n], launches[n] / steps) for n in time}
    return out


runs = [load(p) for p in sys.argv[1:]]
for label in ("T=40", "T=256"):
    names = sorted(set().union(*(r[label] for r in runs)), key=lambda n: -runs[0][label].get(n, (0, 0))[0])
    for n in names:
        print(f"{label:6} {n:40}" + "".join(f" {r[label].get(n, (0, 0))[0]:9.1f} us {r[label].get(n, (0, 0))[1]:4.0f}x"
                                             for r in runs))
    print(f"{label:6} {'total':40}" + "".join(f" {sum(t for t, _ in r[label].values()):9.1f} us      " for r in runs))
