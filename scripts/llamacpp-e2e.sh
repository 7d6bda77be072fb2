#!/usr/bin/env bash
# infscale against real llama.cpp servers, end to end (issue 15): builds llama-server once from
# the llama-cpp-python source into target/llamacpp (about 7-15 minutes on 2 cores the first
# time; scripts/llamacpp/build.sh), writes the tiny random-weight model, then runs
# tests/llamacpp.rs in release against servers it starts on 127.0.0.2-5. Not part of .ci/run
# (the build is long); the last result is kept in target/llamacpp/e2e-last.txt and quoted in the
# README's reliability section.
#   scripts/llamacpp-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t built < <(scripts/llamacpp/build.sh)
export INFSCALE_LLAMA_SERVER=${built[0]} INFSCALE_LLAMA_MODEL=${built[1]}
out=target/llamacpp/e2e-last.txt
cargo test --release --test llamacpp -- --nocapture --test-threads 1 2>&1 | tee "$out"
grep -q '^test result: ok. 2 passed' "$out"
echo "ok: llama.cpp end to end (log: $out)"
# The unread-replica check from issue 9 against the same build.
scripts/llamacpp/check-unread-replica.sh
