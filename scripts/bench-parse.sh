#!/usr/bin/env bash
# Parse throughput, side by side in one run: infscale against prometheus-parse on the same
# 254 KB vLLM page. Prints each benchmark's median in MB/s and the ratio to prometheus-parse.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench parse -- --noplot "$@" >&2
bytes=$(wc -c < fixtures/bench/vllm-large.prom)
echo "page: fixtures/bench/vllm-large.prom, $bytes bytes"
python3 scripts/criterion-medians.py parse infscale_profile infscale_validate_only \
  infscale_collect_all prometheus_parse_full --bytes "$bytes" --baseline prometheus_parse_full
