#!/usr/bin/env python3
"""The tables of docs/benchmark.md's "What faster starts buy", from scripts/start-paths.sh's runs.

    start-paths.py DIR POOL...               the Markdown tables from DIR's suite JSON files
    start-paths.py --policies simulate.rs    RECOMMENDED and RECOMMENDED_TO_ZERO, one a line

DIR holds one `simulate --suite --json` output per configuration, named as start-paths.sh names
them: cold-today, cold-30, cold-10, and pool-N-S-P for each POOL N@P (a pool of N at price P)
woken in S seconds.
"""

import json
import re
import sys
from pathlib import Path


def policies(source):
    """The two recommended policy strings, as src/cli/simulate.rs spells them."""
    text = Path(source).read_text()
    found = []
    for name in ("RECOMMENDED", "RECOMMENDED_TO_ZERO"):
        m = re.search(r"pub const " + name + r': &str\s*=\s*"([^"]*)";', text)
        if not m:
            sys.exit(f"{source}: no `pub const {name}: &str = \"...\";`")
        found.append(m.group(1))
    return found


def configurations(pools):
    """(file stem, row label) in the tables' order."""
    rows = [
        ("cold-today", "today: every start cold (91 s; long-cold-start 136 s)"),
        ("cold-30", "every start 30 s"),
        ("cold-10", "every start 10 s"),
    ]
    for pool in pools:
        n, _, p = pool.partition("@")
        for s in ("30", "10"):
            rows.append((f"pool-{n}-{s}-{p}", f"pool of {n} at price {p}, woken in {s} s"))
    return rows


def load(directory, stem):
    path = Path(directory) / f"{stem}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: {e}")


def cell(p):
    """A policy's miss % beyond the bound's own (mean, worst day), replica-minutes and ratio to
    the bound."""
    return (
        f"{p['excess_miss_pct']:.2f}% / {p['excess_miss_pct_max']:.2f}%",
        f"{p['replica_minutes']:.1f}",
        f"{p['bound_ratio']:.2f}x",
    )


HEADER = (
    "| starts | bound r-min | always on: miss % mean / worst | r-min | x bound "
    "| to zero: miss % mean / worst | r-min | x bound |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|"
)


def main(directory, pools):
    rows = configurations(pools)
    runs = {stem: load(directory, stem) for stem, _ in rows}
    first = runs[rows[0][0]]
    names = [f["family"] for f in first["families"]]
    # Per configuration and policy: the families' means, for the summary.
    summary = {stem: [[], []] for stem, _ in rows}
    out = []
    for family in names:
        about = next(f["about"] for f in first["families"] if f["family"] == family)
        out.append(f"**{family}** ({about})\n")
        out.append(HEADER)
        for stem, label in rows:
            fam = next(f for f in runs[stem]["families"] if f["family"] == family)
            cells = []
            for i, p in enumerate(fam["policies"][:2]):
                cells.extend(cell(p))
                summary[stem][i].append(p)
            out.append(
                f"| {label} | {fam['clairvoyant_replica_minutes']:.1f} | " + " | ".join(cells) + " |"
            )
        out.append("")
    days = first.get("days_per_family")
    print(f"All {len(names)} families, {days} days each: misses beyond each day's bound's own, "
          "their mean over the families and the worst day of any family; the mean ratio to the "
          "bound.\n")
    print("| starts | always on: miss % mean / worst | x bound | to zero: miss % mean / worst | x bound |")
    print("|---|---:|---:|---:|---:|")
    for stem, label in rows:
        cells = []
        for ps in summary[stem]:
            mean = sum(p["excess_miss_pct"] for p in ps) / len(ps)
            worst, at = max((p["excess_miss_pct_max"], names[i]) for i, p in enumerate(ps))
            ratio = sum(p["bound_ratio"] for p in ps) / len(ps)
            cells += [f"{mean:.2f}% / {worst:.2f}% ({at})", f"{ratio:.2f}x"]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    print("\n".join(out))


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--policies":
        print("\n".join(policies(args[1])))
    elif len(args) >= 2 and all("@" in a for a in args[1:]):
        main(args[0], args[1:])
    else:
        sys.exit(__doc__)
