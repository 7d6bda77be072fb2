#!/usr/bin/env bash
# infscale on a throwaway kind cluster, installed as docs/operate.md installs it, for a machine
# with Docker, kind and kubectl (no GPU). It creates the cluster, installs KEDA from its release
# manifest, builds the image and loads it into the cluster, then applies manifests/scaler and
# manifests/activator (through scripts/kind/, which only point them at the image built here)
# and an emulated model (scripts/kind/model.yaml: Deployment, Service and ScaledObject `chat`
# in namespace llm, serve mode, `infscale emulate` with vLLM's metrics and a 20 s cold start,
# 8 requests per replica, from zero). Clients run inside the cluster as a client of the model
# would: a Job in namespace llm running `infscale load --url http://chat:8000` from the same
# image, calling the model's Service by its short name.
#
# What it checks, failing (exit 1, after printing what the cluster says) on the first miss:
#   - the scaler and the activator roll out, and KEDA takes chat to zero with the activator in
#     its Service's path (slice chat-infscale, with a ready activator endpoint);
#   - for each of CYCLES cycles, 0 -> N -> 0: the load Job, started at zero, wakes chat; chat
#     reaches at least MIN_PEAK ready replicas under the load; every request the Job sent is
#     answered (`infscale load` reports as many ok as requests, and no error of any kind: none
#     lost, refused, timed out or cut); at least one was held at the activator (the wake went
#     through it); and chat is back at zero within COOLDOWN seconds of the load's end.
# Deletes the cluster on exit (KEEP_CLUSTER=1 keeps it).
#
#   scripts/kind-demo.sh      # CYCLES=2 CONCURRENCY=32 DURATION=120 COOLDOWN=300 MIN_PEAK=2
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${CLUSTER:-infscale-demo}
KEDA_VERSION=${KEDA_VERSION:-2.17.0}
KEDA_URL=${KEDA_URL:-https://github.com/kedacore/keda/releases/download/v${KEDA_VERSION}/keda-${KEDA_VERSION}.yaml}
IMAGE=infscale:kind-demo # the name scripts/kind/*/kustomization.yaml and model.yaml use
CYCLES=${CYCLES:-2}
CONCURRENCY=${CONCURRENCY:-32}
DURATION=${DURATION:-120}
COOLDOWN=${COOLDOWN:-300}
MIN_PEAK=${MIN_PEAK:-2}
CLIENT_URL=${CLIENT_URL:-http://chat:8000} # the short name: a client in namespace llm
COUNTS_KEY=chat.llm.svc                     # the key the activator counts chat under

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "kind-demo: needs $tool on PATH" >&2; exit 1; }
done

kctl() { kubectl --context "kind-$CLUSTER" "$@"; }

cleanup() {
  if [[ ${KEEP_CLUSTER:-0} == 1 ]]; then
    echo "kind-demo: kept cluster $CLUSTER (kind delete cluster --name $CLUSTER)" >&2
  else
    kind delete cluster --name "$CLUSTER" >&2 || true
  fi
}
trap cleanup EXIT

# What the cluster says about chat, for a failure's report.
report() {
  echo "kind-demo: --- what the cluster says ---" >&2
  kctl -n llm get deployment,endpointslice,scaledobject,job -o wide >&2 || true
  kctl -n llm describe scaledobject chat 2>&1 | tail -n 20 >&2 || true
  kctl -n infscale get lease -o wide >&2 || true
  local pod
  for pod in $(activator_pods); do
    echo "kind-demo: $pod /routes:" >&2
    kctl get --raw "/api/v1/namespaces/infscale/pods/$pod:9092/proxy/routes" >&2 || true
    echo >&2
  done
  kctl -n infscale logs deployment/infscale --tail=20 >&2 || true
  kctl -n infscale logs deployment/infscale-activator --tail=20 >&2 || true
}

fail() {
  echo "kind-demo: FAILED: $*" >&2
  report
  exit 1
}

# desired/ready replicas of chat, e.g. "0/" at zero, "4/4" when up.
replicas() {
  kctl -n llm get deployment chat -o jsonpath='{.spec.replicas}/{.status.readyReplicas}' 2>/dev/null
}

ready_replicas() {
  local r
  r=$(kctl -n llm get deployment chat -o jsonpath='{.status.readyReplicas}' 2>/dev/null || true)
  echo "${r:-0}"
}

activator_pods() {
  kctl -n infscale get pods -l app.kubernetes.io/component=activator \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' 2>/dev/null || true
}

# The sum over every activator pod of one of its route series for chat (a counter).
activator_sum() {
  local series=$1 pod total=0 value
  for pod in $(activator_pods); do
    value=$(kctl get --raw "/api/v1/namespaces/infscale/pods/$pod:9092/proxy/metrics" |
      awk -v s="$series{" -v k="route=\"$COUNTS_KEY\"" \
        'index($0, s) == 1 && index($0, k) { sum += $NF } END { printf "%d", sum }') ||
      { echo "kind-demo: cannot read $pod's /metrics" >&2; return 1; }
    total=$((total + ${value:-0}))
  done
  echo "$total"
}

# Waits up to $1 seconds for chat to be at zero.
wait_for_zero() {
  local deadline=$((SECONDS + $1))
  until [[ $(replicas) == 0/* ]]; do
    ((SECONDS < deadline)) || return 1
    printf 'kind-demo: chat replicas (desired/ready) %s\n' "$(replicas)" >&2
    sleep 5
  done
}

# Whether serve has the activator in chat's path: a ready endpoint in chat-infscale.
activator_in_path() {
  local ready
  ready=$(kctl -n llm get endpointslice chat-infscale \
    -o jsonpath='{range .endpoints[*]}{.conditions.ready}{"\n"}{end}' 2>/dev/null) || return 1
  grep -qx true <<<"$ready"
}

# One cycle's clients: a Job in llm, from the image, calling the Service by CLIENT_URL.
start_load() {
  local name=$1
  kctl apply -f - >&2 <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $name
  namespace: llm
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: load
          image: $IMAGE
          imagePullPolicy: IfNotPresent
          args: ["load", "--url", "$CLIENT_URL", "--concurrency", "$CONCURRENCY",
                 "--duration", "$DURATION", "--output-tokens", "256", "--timeout", "300"]
          resources:
            requests: {cpu: 50m, memory: 32Mi}
            limits: {memory: 256Mi}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: ["ALL"]}
EOF
}

# Waits for Job $1 to end, printing chat's replicas and keeping the peak in $peak.
peak=0
wait_for_load() {
  local name=$1 deadline=$((SECONDS + DURATION + 420)) start=$SECONDS succeeded failed ready
  while true; do
    succeeded=$(kctl -n llm get job "$name" -o jsonpath='{.status.succeeded}' 2>/dev/null || true)
    failed=$(kctl -n llm get job "$name" -o jsonpath='{.status.failed}' 2>/dev/null || true)
    ready=$(ready_replicas)
    ((ready > peak)) && peak=$ready
    printf 'kind-demo: t=%4ds chat replicas (desired/ready) %s\n' "$((SECONDS - start))" "$(replicas)" >&2
    [[ ${succeeded:-0} -ge 1 ]] && return 0
    [[ ${failed:-0} -ge 1 ]] && fail "job $name failed: $(kctl -n llm logs "job/$name" --tail=5 2>&1)"
    ((SECONDS < deadline)) || fail "job $name did not end within $((DURATION + 420)) s"
    sleep 5
  done
}

# Checks Job $1's report: as many ok as requests, and no error at all.
check_load() {
  local name=$1 log line
  log=$(kctl -n llm logs "job/$name") || fail "job $name: no log"
  echo "$log" >&2
  line=$(grep -E '[0-9]+ requests, [0-9]+ ok, errors: ' <<<"$log" | tail -n 1 || true)
  [[ $line =~ ([0-9]+)\ requests,\ ([0-9]+)\ ok,\ errors:\ (.*)$ ]] ||
    fail "job $name: no report line from infscale load"
  local requests=${BASH_REMATCH[1]} ok=${BASH_REMATCH[2]} errors=${BASH_REMATCH[3]}
  ((requests > 0)) || fail "job $name sent no request"
  [[ $errors == - && $ok == "$requests" ]] ||
    fail "job $name: $requests requests, $ok ok, errors: $errors (a request lost or refused)"
  echo "kind-demo: job $name: $requests requests, all answered" >&2
}

echo "kind-demo: creating cluster $CLUSTER" >&2
kind create cluster --name "$CLUSTER" --wait 120s >&2

echo "kind-demo: installing KEDA $KEDA_VERSION" >&2
kctl apply --server-side -f "$KEDA_URL" >&2
kctl -n keda wait --for=condition=Available deployment --all --timeout=300s >&2

echo "kind-demo: building $IMAGE and loading it into the cluster" >&2
docker build -t "$IMAGE" . >&2
kind load docker-image "$IMAGE" --name "$CLUSTER" >&2

echo "kind-demo: applying the scaler, the activator and the emulated model (docs/operate.md)" >&2
kctl apply -k scripts/kind/scaler >&2
kctl apply -k scripts/kind/activator >&2
kctl -n infscale rollout status deployment/infscale --timeout=180s >&2 ||
  fail "the scaler did not roll out"
kctl -n infscale rollout status deployment/infscale-activator --timeout=180s >&2 ||
  fail "the activator did not roll out"
kctl apply -f scripts/kind/model.yaml >&2

echo "kind-demo: waiting for KEDA to take chat to zero (up to ${COOLDOWN}s)" >&2
wait_for_zero "$COOLDOWN" || fail "chat did not reach zero within ${COOLDOWN}s"

for ((cycle = 1; cycle <= CYCLES; cycle++)); do
  echo "kind-demo: cycle $cycle of $CYCLES, from zero" >&2
  activator_in_path || fail "chat is at zero without the activator in its Service's path"
  held_before=$(activator_sum infscale_activator_held_duration_seconds_count) || fail "reading the activator"
  forwarded_before=$(activator_sum infscale_activator_forwarded_total) || fail "reading the activator"
  peak=0
  job=load-$cycle
  echo "kind-demo: $CONCURRENCY clients for ${DURATION}s calling $CLIENT_URL from namespace llm" >&2
  start_load "$job"
  wait_for_load "$job"
  check_load "$job"
  held=$(activator_sum infscale_activator_held_duration_seconds_count) || fail "reading the activator"
  forwarded=$(activator_sum infscale_activator_forwarded_total) || fail "reading the activator"
  held=$((held - held_before))
  forwarded=$((forwarded - forwarded_before))
  echo "kind-demo: cycle $cycle: peak $peak ready replicas; $held held at the activator, $forwarded through it" >&2
  ((held > 0)) || fail "cycle $cycle: no request was held at the activator, so the wake was not through it"
  ((peak >= MIN_PEAK)) || fail "cycle $cycle: chat peaked at $peak ready replicas (MIN_PEAK=$MIN_PEAK)"
  echo "kind-demo: load over; waiting for chat to go back to zero (up to ${COOLDOWN}s)" >&2
  wait_for_zero "$COOLDOWN" || fail "cycle $cycle: chat did not go back to zero within ${COOLDOWN}s"
done

kctl -n llm get scaledobject chat >&2
echo "kind-demo: $CYCLES cycle(s) 0 -> N -> 0 with short-name clients, every request answered" >&2
