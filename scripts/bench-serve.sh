#!/usr/bin/env bash
# The scaler under load, as a separate process: CPU and memory of collectors scraping 100
# stand-in pods every second, and GetMetrics latency with 1,000 targets registered.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench serve
