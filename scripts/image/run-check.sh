#!/usr/bin/env bash
# Starts infscale's image with a real container runtime (podman, runc or crun) as Kubernetes
# runs it — user 65532, read-only root filesystem (no writable /tmp either), no capabilities,
# no new privileges — and checks what a cluster would rely on:
#   1. `infscale serve` answers its gRPC health check SERVING (grpc.health.v1.Health/Check over
#      h2c, the call a `grpc:` readiness probe makes) and `/healthz` on the metrics port;
#   2. `infscale activator` in proxy mode, routes file mounted read-only, holds a request while
#      its upstream is down (counted Held in /queue) and, once an upstream (python3 http.server
#      on 127.0.0.1) comes up, releases it: the client gets the upstream's answer.
#
#   scripts/image/run-check.sh [IMAGE]     (default: ghcr.io/infscale/infscale:VERSION, built
#                                           by scripts/image/build.sh when not in storage)
#
# Everything listens on 127.0.0.1 (host network: the containers' sockets are the host's
# loopback). Needs root; installs podman and runc with apt-get when missing. PODMAN_RUNTIME
# (runc, crun) and STORAGE_DRIVER override the runtime and the storage driver. Exits non-zero
# on the first failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
image=${1:-ghcr.io/infscale/infscale:$version}

need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  echo "run-check: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

podman=(podman)
[ -n "${STORAGE_DRIVER:-}" ] && podman+=(--storage-driver "$STORAGE_DRIVER")
if ! "${podman[@]}" image exists "$image"; then
  echo "run-check: $image is not in the local storage; building it"
  scripts/image/build.sh --tag "$image"
fi

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# crun refuses a hybrid cgroup v1/v2 host whose v2 hierarchy has a controller; runc does not.
runtime=${PODMAN_RUNTIME:-}
if [ -z "$runtime" ]; then
  if command -v runc >/dev/null; then runtime=runc; else runtime=crun; fi
fi
# podman's default limits (nofile 1048576) exceed what an unprivileged sandbox may raise: ask
# for the limits this shell has, which a container may always keep.
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && nofile=1048576
as_in_a_pod=(--runtime "$runtime" --user 65532:65532 --read-only --read-only-tmpfs=false
     --cap-drop ALL --security-opt no-new-privileges
     --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096)
run=("${podman[@]}" run -d --network host "${as_in_a_pod[@]}")

work=$(mktemp -d)
names=()
upstream_pid=""
cleanup() {
  for n in "${names[@]}"; do "${podman[@]}" rm -f -t 0 "$n" >/dev/null 2>&1 || true; done
  if [ -n "$upstream_pid" ]; then kill "$upstream_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

start() { # NAME ARGS... : starts a container of the image, prints nothing
  local name=$1; shift
  names+=("$name")
  "${run[@]}" --name "$name" "$@" >/dev/null || fail "podman could not start $name"
}
logs() { "${podman[@]}" logs "$1" 2>&1 | tail -n 20 >&2; }
wait_http() { # URL NAME : until URL answers 200, at most 30 s
  for _ in $(seq 300); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    [ "$("${podman[@]}" inspect -f '{{.State.Running}}' "$2")" = true ] || { logs "$2"; fail "$2 exited"; }
    sleep 0.1
  done
  logs "$2"; fail "$1 did not answer in 30 s"
}
as_deployed() { # NAME : the process runs as 65532 on a read-only root
  local pid uid root_opts
  pid=$("${podman[@]}" inspect -f '{{.State.Pid}}' "$1")
  uid=$(awk '/^Uid:/{print $2}' "/proc/$pid/status")
  [ "$uid" = 65532 ] || fail "$1 runs as uid $uid, not 65532"
  root_opts=$(awk '$5 == "/" {print $6}' "/proc/$pid/mountinfo" | head -n1)
  case ",$root_opts," in *,ro,*) ;; *) fail "$1's root filesystem is mounted $root_opts";; esac
  ok "$1: pid $pid runs as uid 65532, root filesystem mounted read-only ($root_opts)"
}

echo "image $image, runtime $runtime, storage $("${podman[@]}" info -f '{{.Store.GraphDriverName}}'), network host"
"${podman[@]}" image inspect -f 'user {{.Config.User}}, entrypoint {{.Config.Entrypoint}}, cmd {{.Config.Cmd}}' "$image"

# 0. The second name: infscale called infscale-sim is the tuning CLI.
sim=$("${podman[@]}" run --rm --network none "${as_in_a_pod[@]}" --entrypoint /usr/local/bin/infscale-sim "$image" --help 2>&1) \
  || { printf '%s\n' "$sim" >&2; fail "infscale-sim --help failed"; }
case "$sim" in *"Usage: infscale-sim"*) ;; *) printf '%s\n' "$sim" >&2; fail "infscale-sim is not the tuning CLI";; esac
ok "/usr/local/bin/infscale-sim answers as the tuning CLI ($(printf '%s\n' "$sim" | head -n1))"

# 1. serve: gRPC health and /healthz.
grpc=$(free_port); metrics=$(free_port)
start "infscale-check-serve-$$" "$image" serve --listen "127.0.0.1:$grpc" \
  --metrics-listen "127.0.0.1:$metrics" --no-kube --log-format json
wait_http "http://127.0.0.1:$metrics/healthz" "infscale-check-serve-$$"
as_deployed "infscale-check-serve-$$"
body=$(curl -fsS "http://127.0.0.1:$metrics/healthz")
[ "$body" = ok ] || fail "serve /healthz answered '$body'"
ok "serve /healthz on 127.0.0.1:$metrics: $body"
# grpc.health.v1.Health/Check: a gRPC message is 1 flag byte, a 4-byte length, the protobuf.
# HealthCheckResponse{status: SERVING} is field 1 = 1: bytes 08 01.
grpc_check() { # SERVICE : prints the response message as hex, fails on a grpc-status other than 0
  local svc=$1
  if [ -z "$svc" ]; then printf '\0\0\0\0\0' >"$work/req"; else
    python3 -c 'import sys; s=sys.argv[1].encode(); m=b"\x0a"+bytes([len(s)])+s
sys.stdout.buffer.write(b"\0"+len(m).to_bytes(4,"big")+m)' "$svc" >"$work/req"; fi
  curl -sS --http2-prior-knowledge -X POST -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary @"$work/req" -D "$work/headers" -o "$work/resp" \
    "http://127.0.0.1:$grpc/grpc.health.v1.Health/Check" || fail "gRPC health call failed"
  grep -qi '^grpc-status: 0' "$work/headers" || { cat "$work/headers" >&2; fail "grpc-status not 0 for '$svc'"; }
  od -An -tx1 "$work/resp" | tr -d ' \n'
}
for svc in "" externalscaler.ExternalScaler; do
  resp=$(grpc_check "$svc")
  [ "$resp" = 00000000020801 ] || fail "Health/Check('$svc') answered $resp, not SERVING (00000000020801)"
  ok "serve gRPC 127.0.0.1:$grpc grpc.health.v1.Health/Check service='$svc': SERVING"
done

# 2. activator: hold while the upstream is down, release when it is up.
listen=$(free_port); admin=$(free_port); up=$(free_port)
mkdir -p "$work/routes" "$work/upstream/v1"
cat >"$work/routes/routes.yaml" <<EOF
routes:
  - host: chat.llm.svc
    upstream: http://127.0.0.1:$up
    healthPath: /health
    maxHeld: 10
    holdTimeoutSeconds: 60
EOF
chmod -R a+rX "$work"
start "infscale-check-activator-$$" -v "$work/routes:/etc/infscale:ro" "$image" activator \
  --routes /etc/infscale/routes.yaml --learn off --listen "127.0.0.1:$listen" \
  --admin-listen "127.0.0.1:$admin" --log-format json
wait_http "http://127.0.0.1:$admin/healthz" "infscale-check-activator-$$"
as_deployed "infscale-check-activator-$$"

token="answered by the upstream $$-$RANDOM"
curl -sS -m 60 -H 'Host: chat.llm.svc' -o "$work/answer" -w '%{http_code}' \
  "http://127.0.0.1:$listen/v1/answer" >"$work/code" 2>"$work/curl.err" &
client=$!
held=""
for _ in $(seq 100); do
  held=$(curl -fsS "http://127.0.0.1:$admin/queue" | python3 -c \
    'import json,sys; print(json.load(sys.stdin).get("chat.llm.svc",{}).get("Held",0))')
  [ "$held" = 1 ] && break
  sleep 0.1
done
[ "$held" = 1 ] || fail "the activator's /queue does not count the request held (Held=$held)"
sleep 2
kill -0 "$client" 2>/dev/null || fail "the client was answered while no upstream ran: $(cat "$work/code")"
ok "activator 127.0.0.1:$listen holds the request with its upstream down (/queue Held=1, client waiting after 2 s)"

printf 'ok\n' >"$work/upstream/health"
printf '%s\n' "$token" >"$work/upstream/v1/answer"
python3 -m http.server --bind 127.0.0.1 --directory "$work/upstream" "$up" >"$work/upstream.log" 2>&1 &
upstream_pid=$!
start_release=$(date +%s.%N)
wait "$client" || { cat "$work/curl.err" >&2; fail "the held client failed"; }
released=$(python3 -c "import time; print(round(time.time() - $start_release, 2))")
code=$(cat "$work/code")
[ "$code" = 200 ] || fail "the released request was answered $code"
[ "$(cat "$work/answer")" = "$token" ] || fail "the released request's body is '$(cat "$work/answer")'"
ok "upstream up on 127.0.0.1:$up: the held client got 200 '$token' ${released} s later"
held=$(curl -fsS "http://127.0.0.1:$admin/queue" | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["chat.llm.svc"]["Held"])')
[ "$held" = 0 ] || fail "/queue still counts $held held"
ok "activator /queue Held=0 after the release"
echo "run-check: all checks passed"
