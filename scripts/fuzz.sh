#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets/) for SECONDS each, JOBS at a time, niced, and
# writes target/fuzz-last.md: per target the seconds, libFuzzer's executions, the corpus it ended
# with, and crashes (files in fuzz/artifacts/<target>/ from this run).
#
#   scripts/fuzz.sh [SECONDS per target, default 600] [JOBS, default 2] [TARGET...]
#
# With TARGETs, only those (e.g. one whose crash was just fixed); by default all of them.
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`). Each run
# starts from the kept seeds in fuzz/corpus/<target>/ and writes what it finds to
# target/fuzz-corpus/<target>/ (not to the repository); logs in target/fuzz-logs/. A crash is
# reproduced with `cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>`; keep the
# input in fuzz/regressions/<target>/ (tests/fuzz_corpus.rs replays it on stable).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
jobs=${2:-2}
shift $(($# < 2 ? $# : 2))
root=$PWD
# cargo-fuzz builds in fuzz/target; a CARGO_TARGET_DIR set for the main crate would move it.
unset CARGO_TARGET_DIR
if [ $# -gt 0 ]; then
  for t in "$@"; do (cd fuzz && cargo +nightly fuzz build "$t" >&2); done
else
  (cd fuzz && cargo +nightly fuzz build >&2)
fi
bin=$root/fuzz/target/x86_64-unknown-linux-gnu/release
if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi
mkdir -p target/fuzz-logs target/fuzz-corpus
marker=$(mktemp "$root/target/fuzz-logs/.start.XXXXXX")
trap 'rm -f "$marker"' EXIT

run() {
  local t=$1
  mkdir -p "target/fuzz-corpus/$t" "fuzz/artifacts/$t"
  echo "fuzz: $t for ${seconds}s" >&2
  # -timeout: one input taking 25 s is a hang (the machine may be shared and slow).
  local start=$SECONDS
  nice -n 10 "$bin/$t" "target/fuzz-corpus/$t" "fuzz/corpus/$t" \
    -max_total_time="$seconds" -timeout=25 -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/$t/" >"target/fuzz-logs/$t.log" 2>&1 || true
  echo $((SECONDS - start)) >"target/fuzz-logs/$t.seconds"
}

for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run "$t" &
done
wait

out=target/fuzz-last.md
{
  echo "# scripts/fuzz.sh $seconds $jobs ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, shared)"
  echo
  echo "| target | seconds run | executions | exec/s | corpus (inputs/bytes) | coverage | crashes |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for t in "${targets[@]}"; do
    log=target/fuzz-logs/$t.log
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$' || true)
    if [ -z "$execs" ]; then
      execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
    fi
    rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$' || true)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || true)
    corp=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' <<<"$last" | cut -d' ' -f2 || true)
    crashes=$(find "fuzz/artifacts/$t" -type f -newer "$marker" | wc -l)
    ran=$(cat "target/fuzz-logs/$t.seconds" 2>/dev/null || echo "?")
    echo "| $t | $ran | ${execs:-?} | ${rate:-?} | ${corp:-?} | ${cov:-?} | $crashes |"
  done
  echo
  echo "Crash inputs, if any: fuzz/artifacts/<target>/; logs: target/fuzz-logs/<target>.log."
} >"$out"
cat "$out"
