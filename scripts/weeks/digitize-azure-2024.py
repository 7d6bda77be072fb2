#!/usr/bin/env python3
"""Reads the Azure LLM inference trace 2024's published week (invocations per minute, one plot per
service) off the notebook that publishes it, into the 15-minute levels the week families play.

The week-long traces themselves (16.8 M and 27.3 M requests) are not in the dataset's repository;
its notebook, analysis/AzureLLMInferenceDataset2024.ipynb in github.com/Azure/AzurePublicDataset,
carries their per-minute plots ("Number of invocations per minute", Coding from 2024-05-10 and
Conversation from 2024-05-12, each seven days, UTC). This script takes each plot's line, column by
column (about 7.2 minutes a pixel column), calibrated on the plot's own axes (the left and right
spines are the first and last instant of the week, the x axis is 0, and the gridlines are the
y ticks), and writes per 15-minute slot the mean of the line's midpoints: a statistic read off a
published figure, not the data. Run it with the notebook's path:

    python3 scripts/weeks/digitize-azure-2024.py AzureLLMInferenceDataset2024.ipynb

It writes crates/infscale-core/src/sim/week/azure-{code,conv}-2024.csv. Needs Pillow and NumPy.
"""

import base64
import io
import json
import os
import sys

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                   "crates", "infscale-core", "src", "sim", "week")
SLOT_MIN = 15
DAYS = 7
# The cell that plots invocations per minute, and per plot: the file, the service, the week's
# first day, and the value of the gridlines (per minute) from the bottom.
CELL = 18
PLOTS = [("azure-code-2024.csv", "Coding", "2024-05-10 (Friday)", 1000),
         ("azure-conv-2024.csv", "Conversation", "2024-05-12 (Sunday)", 1000)]
LINE = (31, 119, 180)  # matplotlib's first colour


def images(notebook):
    cell = json.load(open(notebook))["cells"][CELL]
    for out in cell.get("outputs", []):
        png = out.get("data", {}).get("image/png")
        if png:
            yield np.array(Image.open(io.BytesIO(base64.b64decode("".join(png)))).convert("RGB")).astype(int)


def axes(im):
    dark = im.sum(axis=2) < 150
    cols = dark.sum(axis=0)
    rows = dark.sum(axis=1)
    left, right = sorted(np.argsort(cols)[-2:])
    bottom = max(np.argsort(rows)[-2:])
    grey = (abs(im[:, :, 0] - im[:, :, 1]) < 5) & (im[:, :, 0] > 150) & (im[:, :, 0] < 230)
    grid = [y for y in range(im.shape[0]) if grey[y].sum() > 0.3 * im.shape[1]]
    return int(left), int(right), int(bottom), sorted(grid, reverse=True)


def levels(im, step):
    left, right, bottom, grid = axes(im)
    per_px = step / float(np.mean(np.diff([bottom] + grid) * -1))
    line = np.ones(im.shape[:2], bool)
    for k in range(3):
        line &= abs(im[:, :, k] - LINE[k]) < 45
    minutes = DAYS * 24 * 60
    slots = [[] for _ in range(minutes // SLOT_MIN)]
    for c in range(left + 1, right):
        ys = np.where(line[:, c])[0]
        if len(ys) == 0:
            continue
        mid = (bottom - (ys.min() + ys.max()) / 2.0) * per_px
        t = (c - left) / float(right - left) * minutes
        slots[min(int(t // SLOT_MIN), len(slots) - 1)].append(mid)
    filled = [float(np.mean(s)) if s else None for s in slots]
    for i, v in enumerate(filled):  # a slot no column fell in takes its neighbours' mean
        if v is None:
            near = [filled[j] for j in (i - 1, i + 1) if 0 <= j < len(filled) and filled[j] is not None]
            filled[i] = float(np.mean(near))
    return filled


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for (name, service, first, step), im in zip(PLOTS, images(sys.argv[1])):
        values = levels(im, step)
        with open(os.path.join(OUT, name), "w") as f:
            f.write(f"# Azure LLM inference trace 2024, {service}: invocations per minute, the mean over each\n")
            f.write(f"# {SLOT_MIN}-minute slot of the published per-minute plot, read off by scripts/weeks/digitize-azure-2024.py\n")
            f.write(f"# from github.com/Azure/AzurePublicDataset analysis/AzureLLMInferenceDataset2024.ipynb (CC-BY).\n")
            f.write(f"# Seven days from {first} 00:00 UTC, one row per slot.\n")
            f.write("day,minute,per_minute\n")
            for i, v in enumerate(values):
                f.write(f"{i * SLOT_MIN // 1440},{i * SLOT_MIN % 1440},{v:.0f}\n")
        print(name, len(values), "slots, peak", round(max(values)), "lowest", round(min(values)))


if __name__ == "__main__":
    main()
