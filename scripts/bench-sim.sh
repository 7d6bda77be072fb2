#!/usr/bin/env bash
# The simulator's speed: the default simulate run, one policy over 24 hours at 30 req/s, and
# tune over 500 points, and 100 seeds of the default policies. Prints each benchmark's median.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench sim -- --noplot "$@" >&2
echo "machine: $(nproc) cores"
python3 scripts/criterion-medians.py sim default_run_all_policies day_30rps_one_policy day_30rps_bound tune_500_points seeds_100_all_policies
