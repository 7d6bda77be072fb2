#!/usr/bin/env bash
# What faster starts buy: the recommended policies (always on, and with scale to zero) on every
# family of the suite with starts of 91 s (today), 30 s and 10 s, (a) every start that fast
# (--cold-start-s: a snapshot restore) and (b) a standby pool woken in that time while cold
# starts stay as they are (--standby N --warm-start S --standby-price P), each beside its own
# clairvoyant bound. Prints the Markdown tables of docs/benchmark.md ("What faster starts buy").
#
#   scripts/start-paths.sh [TRACES_DIR] [DAYS_PER_FAMILY] [POOL...]
#
# POOL is N@P, a pool of N at price P [default: 2@0.25 4@0.25]; defaults: traces, 40 days. Each
# configuration is one scripts/suite.sh run (--json), kept in $OUT (default: a temporary
# directory; with REUSE=1 a configuration whose file is there is not run again), and
# scripts/start-paths.py turns them into the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-traces}
days=${2:-40}
shift $(( $# < 2 ? $# : 2 ))
pools=("$@")
[ ${#pools[@]} -gt 0 ] || pools=(2@0.25 4@0.25)
out=${OUT:-$(mktemp -d)}
mapfile -t policies < <(python3 scripts/start-paths.py --policies src/cli/simulate.rs)
[ ${#policies[@]} -eq 2 ] || exit 1
run() {
  local name=$1
  shift
  if [ "${REUSE:-0}" = 1 ] && [ -s "$out/$name.json" ]; then
    return
  fi
  echo "== $name: $*" >&2
  # The tables read the policies and the bounds, not the anchors: no search.
  scripts/suite.sh "$dir" "$days" --json --search-points none "${policies[@]}" "$@" >"$out/$name.json"
}
run cold-today
run cold-30 --cold-start-s 30
run cold-10 --cold-start-s 10
for pool in "${pools[@]}"; do
  n=${pool%@*}
  p=${pool#*@}
  for s in 30 10; do
    run "pool-$n-$s-$p" --standby "$n" --warm-start "$s" --standby-price "$p"
  done
done
echo "JSON in $out" >&2
python3 scripts/start-paths.py "$out" "${pools[@]}"
