#!/usr/bin/env bash
# The benchmark of days no single generator owns: every policy `simulate` prints by default, on
# every family of `simulate --suite`, each family on its own days beside its anchors (its best
# fixed fleet and the best point of a bounded search on that family alone), then each policy's
# worst family.
#
#   scripts/suite.sh [TRACES_DIR] [DAYS_PER_FAMILY]   (default: ./traces, 40 days)
#
# TRACES_DIR holds the public production traces the suite replays as families of their own, each
# played as the seed's story with a warm start (any that are missing are left out, with a note):
#   AzureLLMInferenceTrace_conv.csv, AzureLLMInferenceTrace_code.csv
#       github.com/Azure/AzurePublicDataset, data/ (one hour each, November 2023)
#   conversation_trace.jsonl
#       github.com/kvcache-ai/Mooncake, FAST25-release/traces/ (played at a quarter of its rate:
#       its prompts average 12,000 tokens; with max=48: its days' bounds peak at 44 replicas,
#       past the suite's --max of 8)
# Extra arguments after these two go to `infscale simulate` (e.g. policies, --json, --families;
# --anchors FILE reads the anchors a `--json` run saved instead of searching again).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-traces}
days=${2:-40}
shift $(( $# < 2 ? $# : 2 ))
cargo build --release -q
traces=()
for spec in AzureLLMInferenceTrace_conv.csv AzureLLMInferenceTrace_code.csv conversation_trace.jsonl@0.25,max=48; do
  file=${spec%@*}
  if [ -f "$dir/$file" ]; then
    traces+=(--suite-trace "$dir/$spec")
  else
    echo "note: $dir/$file not found; its family is left out" >&2
  fi
done
exec "${CARGO_TARGET_DIR:-target}/release/infscale" simulate --suite --seeds "$days" "${traces[@]}" "$@"
