#!/usr/bin/env python3
"""The benchmark's Results table from `scripts/suite.sh ... --json` output (docs/benchmark.md).

    scripts/suite-table.py SUITE.json POLICY...

Per family: the bound, its own misses, the best fixed fleet, the best search point, then each
named policy's mean / worst-day excess miss % / mean ratio to the bound, its cost over the best
search point's, and whether the best fixed fleet dominates it; a last row per policy from the
JSON's summary.
"""
import json
import sys

NAMES = {
    "trace:AzureLLMInferenceTrace_conv": "trace: Azure conversation",
    "trace:AzureLLMInferenceTrace_code": "trace: Azure code",
    "trace:conversation_trace@0.25": "trace: Mooncake at x0.25",
}


def name(family):
    return NAMES.get(family, family)


def anchor(a):
    cell = f"{a['excess_mean']:.2f} / {a['excess_max']:.2f} / {a['bound_ratio']:.2f}x"
    return cell if a["meets_bar"] else cell + " (none meets the bar)"


def fixed(a):
    n = a["policy"].split("min=")[1].split(",")[0]
    return f"{n}: {anchor(a)}"


def search(a, fleet):
    if a["policy"] == fleet["policy"]:
        return "the fixed fleet"
    short = a["policy"].replace(",forecast=history", "").replace(",cooldown=300", "")
    short = short.replace(",max=8", "")
    return f"`{short}`: {anchor(a)}"


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: suite-table.py SUITE.json POLICY...")
    with open(sys.argv[1]) as f:
        suite = json.load(f)
    wanted = sys.argv[2:]
    head = ["family", "bound replica-min", "bound misses", "best fixed fleet", "best search point"]
    print("| " + " | ".join(head + [f"`{p}`" for p in wanted]) + " |")
    print("|---|---:|---:|---|---|" + "---|" * len(wanted))
    for fam in suite["families"]:
        by = {p["policy"]: p for p in fam["policies"]}
        cells = [
            name(fam["family"]),
            f"{fam['clairvoyant_replica_minutes']:.1f}",
            f"{fam['clairvoyant_miss_pct']:.2f}%",
            fixed(fam["best_fixed"]),
            search(fam["best_search"], fam["best_fixed"]),
        ]
        for w in wanted:
            p = by.get(w)
            if p is None:
                sys.exit(f"{sys.argv[1]}: no policy {w!r} in family {fam['family']}")
            cell = (
                f"{p['excess_miss_pct']:.2f} / {p['excess_miss_pct_max']:.2f} / "
                f"{p['bound_ratio']:.2f}x; {p['x_best_search']:.2f}x"
            )
            if p["dominated_by_fixed"]:
                cell += " **dominated**"
            cells.append(cell)
        print("| " + " | ".join(cells) + " |")
    summary = {s["policy"]: s for s in suite["summary"]}
    row = ["**over the families**", "", "", "", ""]
    for w in wanted:
        s = summary[w]
        row.append(
            f"{s['x_best_search_mean']:.2f}x best (over {s['x_best_search_families']}); "
            f"worst family {s['worst_mean'][0]:.2f}% ({name(s['worst_mean'][1])}), "
            f"worst day {s['worst_day'][0]:.2f}% ({name(s['worst_day'][1])}); "
            f"dominated in {len(s['dominated_in'])} of {len(suite['families'])}"
        )
    print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
