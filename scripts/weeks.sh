#!/usr/bin/env bash
# Advice judged on 24-hour days played as weeks: every policy `simulate` prints by default (or
# the ones given), on days with a diurnal shape, night troughs, weekdays and weekends and bursts
# on top, each run of 14 days played without a break so that what a policy learns is carried
# from day to day, beside each day's clairvoyant bound and the fixed fleets.
#
#   scripts/weeks.sh [TRACES_DIR] [RUNS] [FIRST_SEED]   (default: ./traces, 4 runs from seed 3)
#
# Seeds 1 and 2 are the weeks the recommendation was tuned on; the default judges it on the four
# after them, which it never saw. The families: the three published shapes (azure-code,
# azure-conv, burstgpt; crates/infscale-core/src/sim/week/shapes.rs says where each comes from),
# with arrivals drawn, and each public trace TRACES_DIR holds played inside its source's weeks
# (its own arrivals and lengths, superposed and thinned to the week's rate):
#   AzureLLMInferenceTrace_code.csv, AzureLLMInferenceTrace_conv.csv
#       github.com/Azure/AzurePublicDataset, data/ (one hour each, November 2023)
# Extra arguments after these three go to `infscale simulate` (e.g. policies, --json, --alone,
# --days N).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-traces}
runs=${2:-4}
first=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
cargo build --release -q
traces=()
for spec in azure-code=AzureLLMInferenceTrace_code.csv azure-conv=AzureLLMInferenceTrace_conv.csv; do
  file=${spec#*=}
  if [ -f "$dir/$file" ]; then
    traces+=(--week-trace "${spec%%=*}=$dir/$file")
  else
    echo "note: $dir/$file not found; its family is left out" >&2
  fi
done
exec "${CARGO_TARGET_DIR:-target}/release/infscale" simulate --weeks \
  --week-sources azure-code,azure-conv,burstgpt "${traces[@]}" \
  --seeds "$runs" --first-seed "$first" "$@"
