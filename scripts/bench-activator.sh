#!/usr/bin/env bash
# The activator as a proxy, side by side in one run: wrk against a stand-in upstream (nginx
# returning a small JSON answer) directly, through `infscale activator`, and through nginx as a
# reverse proxy (the anchor a proxy is judged against). Three interleaved rounds per setup;
# medians. Then the memory of 10,000 held requests (`cargo bench --bench activator`), and 1,000
# token streams through each (`cargo bench --bench streams`).
#
# Installs wrk and nginx from Debian's packages if missing (root). All on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null || ! command -v nginx >/dev/null; then
  apt-get update -q && apt-get install -y -q wrk nginx >/dev/null
fi
cargo build --release --bin infscale >&2
work=$(mktemp -d)
source scripts/nginx-anchor.sh
trap 'kill $(jobs -p) 2>/dev/null || true; nginx_anchor_stop "$work"; rm -rf "$work"' EXIT
# Token streams (benches/streams.rs) through nginx: unbuffered, as nginx must be set up for SSE.
nginx_anchor "$work" 18081 18082 "server {
    listen 127.0.0.1:18096;
    location / { proxy_pass http://127.0.0.1:18095; proxy_http_version 1.1; proxy_buffering off; proxy_read_timeout 60s; }
  }"
./target/release/infscale activator --upstream http://127.0.0.1:18081 --health-path /health \
  --listen 127.0.0.1:18083 --admin-listen 127.0.0.1:18084 >"$work/activator.log" 2>&1 &
sleep 1
declare -A url=([direct]=http://127.0.0.1:18081/v1/completions [activator]=http://127.0.0.1:18083/v1/completions [nginx-proxy]=http://127.0.0.1:18082/v1/completions)
for conns in 32 1; do
  for round in 1 2 3; do
    for setup in direct activator nginx-proxy; do
      wrk -t1 -c$conns -d6s --latency "${url[$setup]}" > "$work/wrk-$conns-$setup-$round.txt"
    done
  done
done
python3 - "$work" <<'PY'
import re, statistics, sys
work = sys.argv[1]
def us(v):
    n, unit = re.match(r"([\d.]+)(us|ms|s)", v).groups()
    return float(n) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]
def read(path):
    t = open(path).read()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
    p50 = us(re.search(r"^\s+50%\s+(\S+)", t, re.M).group(1))
    p99 = us(re.search(r"^\s+99%\s+(\S+)", t, re.M).group(1))
    return rps, p50, p99
print(f"wrk -t1 -d6s, medians of 3 interleaved rounds, this machine ({__import__('os').cpu_count()} cores, shared by wrk, nginx and the proxy)")
for conns in (32, 1):
    print(f"\n{conns} connection(s):")
    print(f"{'setup':12} {'req/s':>9} {'p50':>9} {'p99':>9} {'x direct req/s':>15} {'p50 added':>10}")
    base = None
    for setup in ("direct", "activator", "nginx-proxy"):
        runs = [read(f"{work}/wrk-{conns}-{setup}-{r}.txt") for r in (1, 2, 3)]
        rps = statistics.median(r[0] for r in runs)
        p50 = statistics.median(r[1] for r in runs)
        p99 = statistics.median(r[2] for r in runs)
        if base is None:
            base = (rps, p50)
        print(f"{setup:12} {rps:9.0f} {p50:7.0f}us {p99:7.0f}us {rps / base[0]:14.2f}x {p50 - base[1]:8.0f}us")
PY
# The anchor for memory: nginx proxying 9,000 requests to an upstream that accepts and never
# answers (nginx needs two descriptors per pending request; 9,000 fits the 20,000 limit here).
cat > "$work/blackhole.py" <<'PY'
import asyncio
async def hold(reader, writer):
    await reader.read(65536)
    await asyncio.sleep(3600)
async def main():
    server = await asyncio.start_server(hold, "127.0.0.1", 18091, backlog=4096)
    await server.serve_forever()
asyncio.run(main())
PY
python3 "$work/blackhole.py" &
cat > "$work/nginx-hold.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile 20000;
error_log $work/logs/error-hold.log crit;
pid $work/nginx-hold.pid;
events { worker_connections 19000; }
http {
  access_log off;
  client_body_temp_path $work/body;
  proxy_temp_path $work/proxy;
  proxy_read_timeout 600s;
  server { listen 127.0.0.1:18092 backlog=4096; location / { proxy_pass http://127.0.0.1:18091; } }
}
CONF
nginx -p "$work" -c "$work/nginx-hold.conf"
sleep 1
python3 - "$work" <<'PY'
import socket, sys, time, subprocess
work = sys.argv[1]
pid = int(open(f"{work}/nginx-hold.pid").read())
worker = int(subprocess.check_output(["pgrep", "-P", str(pid)]).split()[0])
def rss(p):
    for line in open(f"/proc/{p}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
before = rss(worker)
body = b'{"model":"llama-3.1-8b","prompt":"Summarise the following support ticket in two sentences.","max_tokens":256}'
req = b"POST /v1/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
socks = []
for _ in range(9000):
    s = socket.create_connection(("127.0.0.1", 18092))
    s.sendall(req)
    socks.append(s)
time.sleep(3)
after = rss(worker)
print(f"nginx (anchor) worker RSS: {before:.1f} MB idle, {after:.1f} MB with 9000 requests pending upstream ({(after - before) * 1024 / 9000:.1f} KB per pending request)")
PY
nginx -p "$work" -c "$work/nginx-hold.conf" -s stop || true
cargo bench --bench activator
# Token streams: 1,000 SSE streams directly, through the activator, and through nginx (the first
# nginx's unbuffered server on 18096, in front of the bench's upstream on 18095).
STREAM_UPSTREAM_PORT=18095 NGINX_STREAM_PORT=18096 \
  NGINX_STREAM_PID="$(pgrep -P "$(cat "$work/nginx.pid")" | head -1)" cargo bench --bench streams
