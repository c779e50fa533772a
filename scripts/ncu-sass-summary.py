#!/usr/bin/env python3
"""Where one kernel launch spends its instructions and stall samples, from ncu's source page:
instructions per unit of work, stall reasons, SASS opcodes, and the phases between the kernel's
BAR.SYNCs (docs/PERFORMANCE.md, "2026-11-27, fourteenth session", used it on the chunked delta
backward, whose unit is a warp and a chunk of 16 steps: 4096 blocks x 2 warps x 16 chunks at T = 256).

    ncu --clock-control none -k regex:NAME --launch-skip S --launch-count 1 \\
        --section SourceCounters --section WarpStateStats -o R PROGRAM ARGS
    ncu --import R.ncu-rep --page source --csv --print-source sass > R.csv
    ncu-sass-summary.py R.csv UNITS"""
import collections
import csv
import re
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(source):
    """'@!P0 LDG.E.CONSTANT R39, ...' -> 'LDG'"""
    m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+)", source.strip())
    return m.group(2) if m else "?"


def main(path, units):
    rows = list(csv.reader(open(path)))
    header = next((r for r in rows if "Address" in r and "Source" in r), None)
    lines = [dict(zip(header, r)) for r in rows[rows.index(header) + 1:] if len(r) == len(header)] if header else []
    if not lines:
        sys.exit(f"{path}: no SASS lines (export the report with --page source --csv --print-source sass)")
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    samples = sum(number(l["Warp Stall Sampling (All Samples)"]) for l in lines) or 1.0
    executed = sum(number(l["Instructions Executed"]) for l in lines)
    print(f"{executed / units:.0f} instructions per unit, {samples:.0f} stall samples")

    by_reason = collections.Counter()
    for l in lines:
        for h in stalls:
            by_reason[h[len("stall_"):]] += number(l[h])
    print("stalls: " + ", ".join(f"{k} {100 * v / samples:.1f}%" for k, v in by_reason.most_common(10)))

    count, waited = collections.Counter(), collections.Counter()
    for l in lines:
        op = opcode(l["Source"])
        count[op] += number(l["Instructions Executed"])
        waited[op] += number(l["Warp Stall Sampling (All Samples)"])
    print("opcodes per unit (share of the samples):")
    print("  " + ", ".join(f"{k} {v / units:.0f} ({100 * waited[k] / samples:.1f}%)" for k, v in count.most_common(28)))

    print("phases, each ending at a BAR.SYNC (those with 0.5% of the samples or more):")
    phase_executed, phase_samples, phase_ops = 0.0, 0.0, collections.Counter()
    for i, l in enumerate(lines):
        op = opcode(l["Source"])
        phase_executed += number(l["Instructions Executed"])
        phase_samples += number(l["Warp Stall Sampling (All Samples)"])
        phase_ops[op] += number(l["Instructions Executed"])
        if op == "BAR" or i + 1 == len(lines):
            if phase_samples / samples >= 0.005:
                top = ", ".join(f"{k} {v / units:.0f}" for k, v in phase_ops.most_common(6))
                print(f"  to {l['Address'][-6:]}: {phase_executed / units:5.0f} instructions, "
                      f"{100 * phase_samples / samples:5.1f}% of the samples; {top}")
            phase_executed, phase_samples, phase_ops = 0.0, 0.0, collections.Counter()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], float(sys.argv[2]))
