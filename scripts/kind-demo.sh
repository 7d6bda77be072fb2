#!/usr/bin/env bash
# infscale on a throwaway kind cluster, end to end, for a machine with Docker, kind and kubectl
# (no GPU): creates the cluster, installs KEDA from its release manifest, builds the image and
# loads it into the cluster, applies the scaler (manifests/scaler), the activator
# (manifests/activator, with a route for any Host) and an emulated model server
# (scripts/kind/model.yaml: `infscale emulate` behind a ScaledObject, 8 requests per replica,
# scale to zero), then drives load through the activator with `infscale load` over a
# port-forward and prints the replicas every 5 s: from 0 up while loaded, back to 0 after.
# Deletes the cluster on exit (KEEP_CLUSTER=1 keeps it).
#
#   scripts/kind-demo.sh            # CONCURRENCY=32 DURATION=120 by default
#
# `infscale load` runs on this machine: a local build (cargo) or INFSCALE=/path/to/infscale.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${CLUSTER:-infscale-demo}
KEDA_VERSION=${KEDA_VERSION:-2.17.0}
KEDA_URL=${KEDA_URL:-https://github.com/kedacore/keda/releases/download/v${KEDA_VERSION}/keda-${KEDA_VERSION}.yaml}
IMAGE=infscale:kind-demo # the name scripts/kind/*/kustomization.yaml and model.yaml use
CONCURRENCY=${CONCURRENCY:-32}
DURATION=${DURATION:-120}
COOLDOWN=${COOLDOWN:-180}
PORT=${PORT:-18080}

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "kind-demo: needs $tool on PATH" >&2; exit 1; }
done
if [[ -z ${INFSCALE:-} ]]; then
  cargo build --release --bin infscale >&2
  INFSCALE=${CARGO_TARGET_DIR:-$PWD/target}/release/infscale
fi

kctl() { kubectl --context "kind-$CLUSTER" "$@"; }

forward_pid=
watch_pid=
cleanup() {
  local pid
  for pid in "$forward_pid" "$watch_pid"; do
    if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; fi
  done
  if [[ ${KEEP_CLUSTER:-0} == 1 ]]; then
    echo "kind-demo: kept cluster $CLUSTER (kind delete cluster --name $CLUSTER)" >&2
  else
    kind delete cluster --name "$CLUSTER" >&2 || true
  fi
}
trap cleanup EXIT

replicas() {
  kctl -n llm get deployment chat -o jsonpath='{.spec.replicas}/{.status.readyReplicas}' 2>/dev/null
}

watch_replicas() {
  local start=$SECONDS
  while true; do
    printf 'kind-demo: t=%4ds chat replicas (desired/ready) %s\n' "$((SECONDS - start))" "$(replicas)"
    sleep 5
  done
}

echo "kind-demo: creating cluster $CLUSTER" >&2
kind create cluster --name "$CLUSTER" --wait 120s >&2

echo "kind-demo: installing KEDA $KEDA_VERSION" >&2
kctl apply --server-side -f "$KEDA_URL" >&2
kctl -n keda wait --for=condition=Available deployment --all --timeout=300s >&2

echo "kind-demo: building $IMAGE and loading it into the cluster" >&2
docker build -t "$IMAGE" . >&2
kind load docker-image "$IMAGE" --name "$CLUSTER" >&2

echo "kind-demo: applying the scaler, the activator and the emulated model" >&2
kctl apply -k scripts/kind/scaler >&2
kctl -n infscale rollout status deployment/infscale --timeout=180s >&2
kctl apply -f scripts/kind/model.yaml >&2
kctl apply -k scripts/kind/activator >&2
kctl -n llm rollout status deployment/infscale-activator --timeout=180s >&2

echo "kind-demo: waiting for KEDA to take chat to zero (up to ${COOLDOWN}s)" >&2
deadline=$((SECONDS + COOLDOWN))
until [[ $(replicas) == 0/* ]] || ((SECONDS > deadline)); do sleep 5; done
echo "kind-demo: chat replicas before load: $(replicas)" >&2

kctl -n llm port-forward svc/infscale-activator "$PORT:80" >/dev/null 2>&1 &
forward_pid=$!
sleep 3
watch_replicas &
watch_pid=$!

echo "kind-demo: $CONCURRENCY clients for ${DURATION}s through the activator" >&2
"$INFSCALE" load --url "http://127.0.0.1:$PORT" --concurrency "$CONCURRENCY" \
  --duration "$DURATION" --output-tokens 256 --timeout 300 || echo "kind-demo: load failed" >&2

echo "kind-demo: load over; watching the scale-down for ${COOLDOWN}s" >&2
deadline=$((SECONDS + COOLDOWN))
until [[ $(replicas) == 0/* ]] || ((SECONDS > deadline)); do sleep 5; done
kill "$watch_pid" 2>/dev/null || true
watch_pid=
echo "kind-demo: chat replicas at the end: $(replicas)" >&2
kctl -n llm get scaledobject chat >&2
