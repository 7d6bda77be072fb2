#!/usr/bin/env bash
# infscale against real llama.cpp servers, end to end: builds llama-server once from the
# llama-cpp-python source into target/llamacpp (about 7-15 minutes on 2 cores the first time;
# scripts/llamacpp/build.sh), writes the tiny random-weight model, then runs tests/llamacpp.rs in
# release against servers it starts on 127.0.0.2-5: the value served, held requests in order,
# 2,000 streams through the activator with none failed, a release of 20 with none late, a
# sleeping server read from its /props as no capacity. Not part
# of .ci/run (the build is long); the last result is kept in e2e-last.txt beside the build.
#   scripts/llamacpp-e2e.sh             build (once) into target/llamacpp, then test
#   scripts/llamacpp-e2e.sh SERVER MODEL  test an existing build, no rebuild
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 2 ]; then
  built=("$1" "$2")
else
  mapfile -t built < <(scripts/llamacpp/build.sh)
fi
export INFSCALE_LLAMA_SERVER=${built[0]} INFSCALE_LLAMA_MODEL=${built[1]}
out=$(dirname "${built[1]}")/e2e-last.txt
cargo test --release --test llamacpp -- --nocapture --test-threads 1 2>&1 | tee "$out"
grep -q '^test result: ok. 5 passed' "$out"
echo "ok: llama.cpp end to end (log: $out)"
# An unreadable busy replica keeps the target active, against the same build.
scripts/llamacpp/check-unread-replica.sh "${built[@]}"
