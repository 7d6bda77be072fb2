#!/usr/bin/env bash
# Writes what the simulator and the tuner print, for a set of runs, into OUTDIR: run it before
# and after a change that should not change behaviour, then `diff -r BEFORE AFTER`.
#
#   scripts/sim-outputs.sh OUTDIR [TRACES]
#
# TRACES (a directory of the public traces, as scripts/suite.sh takes) adds the suite on them.
# Uses target/release/infscale; builds it first.
set -euo pipefail
out=${1:?usage: scripts/sim-outputs.sh OUTDIR [TRACES]}
traces=${2:-}
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/infscale
mkdir -p "$out"
run() {
    local name=$1
    shift
    "$bin" "$@" >"$out/$name" 2>"$out/$name.err" || echo "exit $?" >>"$out/$name.err"
}
run simulate.txt simulate
run simulate.json simulate --json
run simulate-timeline.txt simulate --timeline
run simulate-hpa.txt simulate --mode hpa --timeline
run simulate-zero.txt simulate 'queue:24,min=0,cooldown=300' --timeline
run seeds.json simulate --seeds 20 --json
run seeds-unreadable.txt simulate --seeds 10 --unreadable 0.2
run suite.txt simulate --suite --seeds 4 --search-points none
run standby.txt simulate --standby 2 --warm-start 10 --standby-price 0.25
run tune.txt tune
run gpu.txt gpu
if [ -n "$traces" ]; then
    scripts/suite.sh "$traces" 10 --json >"$out/suite-traces.json" 2>"$out/suite-traces.err"
fi
ls "$out"
