#!/usr/bin/env bash
# Why the activator is where it is against nginx (README, "Measured"): the profiles behind the
# numbers of scripts/bench-activator.sh, rerunnable.
#
# 1. CPU per proxied request: `perf stat` on the activator and on an nginx worker proxying the same
#    upstream while wrk drives 32 connections; CPU time, syscalls and context switches per request.
# 2. Where the activator's CPU goes: `perf record` during the same load, split kernel/user and the
#    top user-space symbols.
# 3. Where a held request's memory goes: heaptrack on an activator holding 2,000 requests, the
#    allocation sites still live at the peak.
#
# Installs wrk, nginx, linux-perf and heaptrack from Debian's packages if missing (root). All on
# 127.0.0.1. Needs perf_event_paranoid <= 2 (the default) to profile its own children.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || need+=(nginx)
command -v perf >/dev/null || need+=(linux-perf)
command -v heaptrack >/dev/null || need+=(heaptrack)
if ((${#need[@]})); then apt-get update -q && apt-get install -y -q "${need[@]}" >/dev/null; fi
cargo build --profile profiling --bin infscale >&2
bin=$PWD/target/profiling/infscale
work=$(mktemp -d)
source scripts/nginx-anchor.sh
trap 'kill $(jobs -p) 2>/dev/null || true; nginx_anchor_stop "$work"; rm -rf "$work"' EXIT
nginx_anchor "$work" 18181 18185
"$bin" activator --upstream http://127.0.0.1:18181 --health-path /health \
  --listen 127.0.0.1:18183 --admin-listen 127.0.0.1:18184 >"$work/activator.log" 2>&1 &
activator=$!
sleep 1
sleep 0.5
nginx_proxy=$(pgrep -P "$(cat "$work/nginx-proxy.pid")" | head -1)
echo "nginx proxy worker $nginx_proxy, activator $activator" >&2

if [ -z "${ONLY_HEAP:-}" ]; then
echo "1. CPU per proxied request (wrk -t1 -c32 -d5s; perf stat on the proxy process only)"
printf '%-10s %9s %14s %15s %14s\n' proxy "req/s" "CPU us/req" "syscalls/req" "switches/req"
for _round in 1 2; do
  for who in activator nginx; do
    if [ "$who" = activator ]; then pid=$activator; port=18183; else pid=$nginx_proxy; port=18185; fi
    perf stat -x, -e raw_syscalls:sys_enter,context-switches,task-clock -p "$pid" \
      -o "$work/stat-$who.txt" -- sleep 5 &
    stat=$!
    wrk -t1 -c32 -d5s "http://127.0.0.1:$port/v1/completions" > "$work/wrk-$who.txt"
    wait "$stat"
    python3 - "$work" "$who" <<'PY'
import re, sys
work, who = sys.argv[1:]
w = open(f"{work}/wrk-{who}.txt").read()
n = int(re.search(r"(\d+) requests in", w).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", w).group(1))
stat = {}
for line in open(f"{work}/stat-{who}.txt"):
    parts = line.strip().split(",")
    if len(parts) > 3 and parts[0].replace(".", "").isdigit():
        stat[parts[2]] = float(parts[0])
print(f"{who:10} {rps:9.0f} {stat['task-clock'] * 1000 / n:14.1f} "
      f"{stat['raw_syscalls:sys_enter'] / n:15.2f} {stat['context-switches'] / n:14.3f}")
PY
  done
done

echo
echo "2. Kernel and user-space shares of each proxy's CPU (perf record, 4 s under the same load)"
for who in activator nginx; do
  if [ "$who" = activator ]; then pid=$activator; port=18183; else pid=$nginx_proxy; port=18185; fi
  wrk -t1 -c32 -d6s "http://127.0.0.1:$port/v1/completions" > /dev/null &
  load=$!
  sleep 1
  perf record -q -F 1999 -g -p "$pid" -o "$work/perf-$who.data" -- sleep 4 2>/dev/null
  wait "$load"
  # (Reports go to files first: `head` closing a pipe early would fail the script under pipefail.)
  perf report -i "$work/perf-$who.data" --no-children --sort dso --stdio -g none \
    > "$work/dso-$who.txt" 2>/dev/null
  echo "$who:"
  grep '%' "$work/dso-$who.txt" | sed -n 1,3p
done
echo "the activator's top user-space symbols:"
perf report -i "$work/perf-activator.data" --no-children --sort symbol --dsos infscale,libc.so.6 \
  --stdio -g none > "$work/symbols.txt" 2>/dev/null
grep '%' "$work/symbols.txt" | sed -n 1,12p | cut -c1-130
fi
kill "$activator"
wait "$activator" 2>/dev/null || true

echo
echo "3. Where a held request's memory goes (heaptrack, 2,000 requests held, upstream never ready)"
heaptrack -o "$work/held" "$bin" activator --upstream http://127.0.0.1:1 --health-path /health \
  --host bench --max-held 5000 --hold-timeout 600 --listen 127.0.0.1:18186 \
  --admin-listen 127.0.0.1:18187 >"$work/heaptrack.log" 2>&1 &
sleep 2
python3 - <<'PY'
import json, socket, time, urllib.request
body = b'{"model":"llama-3.1-8b","prompt":"Summarise the following support ticket in two sentences.","max_tokens":256}'
req = b"POST /v1/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
socks = []
for _ in range(2000):
    s = socket.create_connection(("127.0.0.1", 18186))
    s.sendall(req)
    socks.append(s)
for _ in range(100):
    held = json.load(urllib.request.urlopen("http://127.0.0.1:18187/queue"))["bench"]["Held"]
    if held >= 2000:
        break
    time.sleep(0.1)
print(f"held: {held}")
time.sleep(1)
PY
pkill -INT -f "infscale activator --upstream http://127.0.0.1:1 " || true
wait
heaptrack_print -f "$work"/held.*zst* --print-peaks 1 --print-allocators 0 --print-leaks 0 \
  --print-temporary 0 --peak-limit 8 > "$work/heap.txt" 2>/dev/null || true
# Each group of allocations still live at the peak, per held request, with the first frame of
# hyper, tokio or infscale that made it.
python3 - "$work/heap.txt" 2000 <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
held = int(sys.argv[2])
for i, line in enumerate(lines):
    m = re.match(r"^\s*([0-9.]+)([KMG]?) consumed over (\d+) calls from:", line)
    if m:
        size = float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]
        if int(m.group(3)) < held / 2:
            continue
        stack = [f.strip() for f in lines[i + 1:i + 80] if f.strip() and not f.strip().startswith("in ")]
        mark = ("hyper::", "tokio::", "infscale::", "h2::")
        at = next((k for k, f in enumerate(stack) if f.startswith(mark) or "infscale::" in f), 0)
        where = re.sub(r"::h[0-9a-f]{16}$", "", stack[at] if stack else "?")
        for code, text in (("$LT$", "<"), ("$GT$", ">"), ("$C$", ","), ("_$u7b$$u7b$closure$u7d$$u7d$", "{closure}")):
            where = where.replace(code, text)
        source = stack[at + 1][3:] if at + 1 < len(stack) and stack[at + 1].startswith("at ") else ""
        source = re.sub(r"^.*/(hyper|tokio|bytes)-[0-9.]+/", r"\1/", source)
        print(f"{size / held / 1024:5.1f} KiB per held request  {where[:80]}  ({source})")
for line in lines:
    if line.startswith(("peak heap memory consumption", "peak RSS")):
        print(line)
PY
