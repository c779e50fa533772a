#!/usr/bin/env python3
"""Writes modarith5-pairs.json: modular arithmetic without brackets (Deletang et al.) over (operator,
digit) tokens, so that every word is a well-formed expression.

The trainer samples words uniformly over the alphabet. Over zoo:modarith:5's letters (0-4 + - *) a
uniform word of length 40 is well-formed with probability (5/8)^20 (3/8)^20 ~ 2.5e-13, so every test
word ends in the error sink and predicting "error" is perfect: that task is degenerate here. With
one token per (operator, digit) pair every word "o1 d1 o2 d2 ..." reads as the expression
"0 o1 d1 o2 d2 ...", evaluated mod 5 with the usual precedence. The state is (s, p): s the sum of the
finished terms, p the signed product of the current term; '+d' -> (s + p, d), '-d' -> (s + p, -d),
'*d' -> (s, p d). The value is s + p; accepting: value 0. All 25 states are reachable and distinct.
Usage: make_modarith_pairs.py [M] > modarithM-pairs.json
"""
import json
import sys

m = int(sys.argv[1]) if len(sys.argv) > 1 else 5
alphabet = [op + str(d) for op in "+-*" for d in range(m)]


def index(s, p):
    return (s % m) * m + (p % m)


transitions = []
for s in range(m):
    for p in range(m):
        row = []
        for op in "+-*":
            for d in range(m):
                row.append(index(s + p, d) if op == "+" else index(s + p, -d) if op == "-" else index(s, p * d))
        transitions.append(row)
dfa = {
    "format": "statetrack.dfa/1",
    "name": f"modarith{m}-pairs",
    "alphabet": alphabet,
    "states": [f"v{(s + p) % m}:s{s}:p{p}" for s in range(m) for p in range(m)],
    "start": 0,
    "accepting": [index(s, p) for s in range(m) for p in range(m) if (s + p) % m == 0],
    "transitions": transitions,
}
json.dump(dfa, sys.stdout, indent=1)
print()
