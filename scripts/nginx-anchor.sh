# shellcheck shell=bash
# Sourced by scripts/bench-activator.sh and scripts/profile-activator.sh: the anchor a proxy is
# judged against. `nginx_anchor WORK UPSTREAM_PORT PROXY_PORT [EXTRA]` starts two nginx
# processes with one worker each, on 127.0.0.1:
# - the stand-in model server on UPSTREAM_PORT (`/health` 200, anything else a small JSON
#   answer), plus any EXTRA server blocks;
# - nginx as a reverse proxy to it on PROXY_PORT, in its own process as the activator runs in
#   its own (sharing the upstream's worker would halve the CPU it gets).
# `nginx_anchor_stop WORK` stops both.

nginx_anchor() {
  local work=$1 upstream=$2 proxy=$3 extra=${4:-}
  mkdir -p "$work/logs"
  local common="worker_processes 1;
events { worker_connections 4096; }"
  local http="access_log off;
  client_body_temp_path $work/body;
  proxy_temp_path $work/proxy;
  upstream model { server 127.0.0.1:$upstream; keepalive 64; }"
  cat > "$work/nginx.conf" <<CONF
$common
error_log $work/logs/error.log;
pid $work/nginx.pid;
http {
  $http
  server {
    listen 127.0.0.1:$upstream;
    location /health { return 200 "ok\n"; }
    location / { default_type application/json; return 200 '{"id":"cmpl-1","choices":[{"text":"hello"}]}'; }
  }
  $extra
}
CONF
  cat > "$work/nginx-proxy.conf" <<CONF
$common
error_log $work/logs/error-proxy.log;
pid $work/nginx-proxy.pid;
http {
  $http
  server {
    listen 127.0.0.1:$proxy;
    location / { proxy_pass http://model; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
  nginx -p "$work" -c "$work/nginx.conf"
  nginx -p "$work" -c "$work/nginx-proxy.conf"
}

nginx_anchor_stop() {
  local c
  for c in nginx nginx-proxy; do nginx -p "$1" -c "$1/$c.conf" -s stop 2>/dev/null || true; done
}
