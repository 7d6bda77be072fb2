#!/usr/bin/env bash
# The fault rules' cost in the simulator: the recommended policies over seeds 1-20 of the default
# scenario, with 0%, 5% and 20% of replica scrapes failing (`simulate --unreadable`). Prints the
# mean SLO miss % and replica-minutes per setting. Needs python3 for the JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
bin=target/release/infscale
policies=("queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120,reserve=auto" "queue+work:192,1.0,lookahead=45,forecast=history,downwindow=120,reserve=auto,min=0,cooldown=300,hold=idle")
for u in 0 0.05 0.2; do
  for seed in $(seq 1 20); do
    "$bin" simulate "${policies[@]}" --seed "$seed" --unreadable "$u" --json
  done | python3 -c '
import json, sys
from collections import defaultdict
docs = []
dec = json.JSONDecoder()
text = sys.stdin.read()
i = 0
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    doc, i = dec.raw_decode(text, i)
    docs.append(doc)
rows = defaultdict(list)
for d in docs:
    for p in d["policies"]:
        rows[p["policy"]].append((p["slo_miss_pct"], p["replica_minutes"]))
for policy, v in rows.items():
    n = len(v)
    print(f"unreadable '"$u"': {policy:58s} seeds {n}: miss {sum(x[0] for x in v)/n:.2f}%  replica-min {sum(x[1] for x in v)/n:.1f}")
'
done
