#!/usr/bin/env bash
# Against real llama-servers on 127.0.0.1: one replica idle and read (with --metrics), one busy
# and unreadable (without --metrics, its /metrics answers 501). `decide` must call the target
# active and never order zero, and name the server's own message.
#   scripts/llamacpp/check-unread-replica.sh [SERVER MODEL]   (default: build them)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -eq 2 ]; then
  built=("$1" "$2")
else
  mapfile -t built < <(scripts/llamacpp/build.sh)
fi
server=${built[0]} model=${built[1]}
cargo build --release -q --bin infscale
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
"$server" -m "$model" --host 127.0.0.1 --port 18181 --metrics --parallel 2 -c 8192 -t 1 -tb 1 >/dev/null 2>&1 &
pids+=($!)
"$server" -m "$model" --host 127.0.0.1 --port 18182 --parallel 2 -c 8192 -t 1 -tb 1 >/dev/null 2>&1 &
pids+=($!)
for port in 18181 18182; do
  for _ in $(seq 1 100); do
    curl -sf "127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
done
# Keep the unreadable one busy with two long completions.
for _ in 1 2; do
  curl -s -m 60 127.0.0.1:18182/completion \
    -d '{"prompt":"hi","n_predict":3000,"ignore_eos":true}' >/dev/null &
  pids+=($!)
done
sleep 0.5
out=$(./target/release/infscale decide http://127.0.0.1:18181/metrics http://127.0.0.1:18182/metrics \
  --target 2 --min 0 --json 2>&1)
echo "$out"
grep -q '"activity": "active"' <<<"$out"
grep -qF "Start it with \`--metrics\`" <<<"$out"
if grep -q '"desired": 0' <<<"$out"; then
  echo "check-unread-replica: an unread replica made the decision order zero:" >&2
  echo "$out" >&2
  exit 1
fi
echo "ok: an unreadable busy llama-server keeps the target active"
