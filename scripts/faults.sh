#!/usr/bin/env bash
# Fault injection on loopback (issue 15, point 3): faulty replicas, a failing Kubernetes API, a
# failing activator, each against the real scaler over gRPC. Every case prints
# `FAULT case | what serve answered | slowest answer ms`; this collects them into a markdown
# table in target/faults-last.md and prints it. Fails if any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --release --test faults --test faults_pods --test faults_kube --test faults_activator \
    -- --nocapture --test-threads 1 2>&1 | tee "$log" | grep -E '^(test |FAULT |test result|error)|FAULT '
status=${PIPESTATUS[0]}
set -e
mkdir -p target
{
    echo "| case | what serve answered | slowest answer (ms) |"
    echo "|---|---|---|"
    # libtest prints "test NAME ... " before a test's own output: a line may start with it.
    grep -o 'FAULT .*' "$log" | sed -e 's/^FAULT /| /' -e 's/$/ |/'
    echo
    echo "$(grep -c 'FAULT ' "$log") cases; $(grep '^test result' "$log" | awk '{p+=$4; f+=$6} END {print p " passed, " f " failed"}') ($(date -u +%Y-%m-%d), \`scripts/faults.sh\`)"
} > target/faults-last.md
cat target/faults-last.md
exit "$status"
