#!/usr/bin/env bash
# Soak of the activator: `infscale activator` (release) in front of an upstream killed and
# restarted on the same loopback address over and over, REQUESTS requests (default 10,000) with
# unique ids. Fails unless each was forwarded once (200, its own body) or answered with an
# explicit error, none lost, none duplicated. Prints RSS at start, peak and end. Then SIGTERM
# under load for both binaries (tests/sigterm.rs) and the short churn (tests/upstream_churn.rs).
# Usage: scripts/soak-activator.sh [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
INFSCALE_SOAK_REQUESTS="${1:-10000}" cargo bench --bench soak_activator
cargo test --release --test sigterm --test upstream_churn -- --nocapture
