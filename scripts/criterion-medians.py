#!/usr/bin/env python3
"""Prints the median of each criterion benchmark of a group, from target/criterion.

usage: criterion-medians.py GROUP NAME... [--bytes N] [--baseline NAME]
With --bytes, adds MB/s; with --baseline, each median's speed as a ratio to that benchmark's.
"""
import json
import sys

args = sys.argv[1:]
size = None
baseline = None
if "--bytes" in args:
    i = args.index("--bytes")
    size = int(args[i + 1])
    del args[i:i + 2]
if "--baseline" in args:
    i = args.index("--baseline")
    baseline = args[i + 1]
    del args[i:i + 2]
group, names = args[0], args[1:]
median = {}
for n in names:
    with open(f"target/criterion/{group}/{n}/new/estimates.json") as f:
        median[n] = json.load(f)["median"]["point_estimate"]  # nanoseconds


def human(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


header = f"{'benchmark':28} {'median':>12}"
if size:
    header += f" {'MB/s':>8}"
if baseline:
    header += f" {'x ' + baseline:>24}"
print(header)
for n in names:
    line = f"{n:28} {human(median[n]):>12}"
    if size:
        line += f" {size / median[n] * 1e3:8.1f}"
    if baseline:
        line += f" {median[baseline] / median[n]:23.1f}x"
    print(line)
