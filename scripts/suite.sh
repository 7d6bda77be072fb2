#!/usr/bin/env bash
# The benchmark of days no single generator owns: every policy `simulate` prints by default, on
# every family of `simulate --suite`, each family on its own days, then each policy's worst family.
#
#   scripts/suite.sh [TRACES_DIR] [DAYS_PER_FAMILY]
#
# TRACES_DIR holds the public production traces the suite replays as families of their own, each
# played as the seed's story with a warm start (any that are missing are left out, with a note):
#   AzureLLMInferenceTrace_conv.csv, AzureLLMInferenceTrace_code.csv
#       github.com/Azure/AzurePublicDataset, data/ (one hour each, November 2023)
#   conversation_trace.jsonl
#       github.com/kvcache-ai/Mooncake, FAST25-release/traces/ (played at a quarter of its rate:
#       its prompts average 12,000 tokens)
# Extra arguments after these two go to `infscale simulate` (e.g. policies, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-traces}
days=${2:-20}
shift $(( $# < 2 ? $# : 2 ))
cargo build --release -q
traces=()
for spec in AzureLLMInferenceTrace_conv.csv AzureLLMInferenceTrace_code.csv conversation_trace.jsonl@0.25; do
  file=${spec%@*}
  if [ -f "$dir/$file" ]; then
    traces+=(--suite-trace "$dir/$spec")
  else
    echo "note: $dir/$file not found; its family is left out" >&2
  fi
done
exec target/release/infscale simulate --suite --seeds "$days" "${traces[@]}" "$@"
