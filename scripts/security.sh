#!/usr/bin/env bash
# The security review and the property tests, in one run: each test file's result, then a
# summary (passed, failed, ignored per file). Extra arguments go to `cargo test` before `--`.
# PROPTEST_CASES raises (or lowers) the number of cases of the property tests.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
files=(security_namespace security_limits security_tls security_logs security_manifests
       properties_decision properties_hpa properties_serve)
args=()
for f in "${files[@]}"; do args+=(--test "$f"); done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test "$@" "${args[@]}" 2>&1 | tee "$log" >&2
status=${PIPESTATUS[0]}
echo
printf '%-22s %7s %7s %8s %9s\n' file passed failed ignored seconds
awk '
  /Running tests\/.*\.rs/ { split($2, p, "/"); f = p[2]; sub(/\.rs$/, "", f) }
  /^test result:/ {
    for (i = 1; i <= NF; i++) {
      if ($(i+1) ~ /^passed/) ps = $i; if ($(i+1) ~ /^failed/) fl = $i
      if ($(i+1) ~ /^ignored/) ig = $i; if ($i == "in") t = $(i+1)
    }
    sub(/s$/, "", t); sub(/;$/, "", ps)
    printf "%-22s %7s %7s %8s %9s\n", f, ps, fl, ig, t
  }' "$log"
if [ "$status" -eq 0 ]; then echo "all passed"; else echo "FAILED (cargo test exit $status)"; fi
exit "$status"
