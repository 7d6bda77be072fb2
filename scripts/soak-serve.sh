#!/usr/bin/env bash
# Soak of the scaler: `infscale serve` (release) with 1,000 targets polled as KEDA and the HPA
# poll them, for SECONDS (default 600). Prints latency percentiles, errors, CPU, and RSS,
# threads and descriptors every minute. Usage: scripts/soak-serve.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
INFSCALE_SOAK_SECONDS="${1:-600}" cargo bench --bench soak_serve
