#!/usr/bin/env bash
# Parse throughput, side by side in one run: infscale against prometheus-parse on the same
# 254 KB vLLM page. Prints each benchmark's median in MB/s and the ratios to prometheus-parse.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench parse -- --noplot "$@" >&2
bytes=$(wc -c < fixtures/bench/vllm-large.prom)
python3 - "$bytes" <<'PY'
import json, sys
size = int(sys.argv[1])
names = ["infscale_profile", "infscale_validate_only", "infscale_collect_all", "prometheus_parse_full"]
median = {}
for n in names:
    with open(f"target/criterion/parse/{n}/new/estimates.json") as f:
        median[n] = json.load(f)["median"]["point_estimate"]  # nanoseconds per page
base = size / median["prometheus_parse_full"] * 1e3
print(f"page: fixtures/bench/vllm-large.prom, {size} bytes")
print(f"{'benchmark':26} {'median':>10} {'MB/s':>8} {'x prometheus-parse':>19}")
for n in names:
    mbps = size / median[n] * 1e3
    print(f"{n:26} {median[n]/1e3:8.1f}us {mbps:8.1f} {mbps/base:18.1f}x")
PY
