#!/usr/bin/env bash
# A CA, a server certificate for infscale.infscale.svc and a client certificate for KEDA, for
# manifests/scaler-tls (run by hand; needs openssl). Writes them to DIR and prints the two
# kubectl commands that make the Secrets, with absolute paths, so they work from any directory:
#   scripts/gen-certs.sh [DIR [MODEL_NAMESPACE]]
# DIR defaults to ./certs. MODEL_NAMESPACE (or the variable of that name; default llm) is the
# namespace of the ScaledObjects that use TLS: KEDA reads the client certificate from Secret
# infscale-client-tls there (one such Secret per model namespace: run the printed second command
# with each). The server's Secret goes in infscale, the install's namespace.
set -euo pipefail
out=$(realpath -m "${1:-certs}")
model_ns=${2:-${MODEL_NAMESPACE:-llm}}
mkdir -p "$out"
cd "$out"
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=infscale-ca" \
  -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=infscale.infscale.svc" \
  -keyout tls.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:infscale.infscale.svc,DNS:infscale.infscale.svc.cluster.local,DNS:infscale\n' > san.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
  -extfile san.ext -out tls.crt 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=keda-operator" \
  -keyout client.key -out client.csr 2>/dev/null
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
  -out client.crt 2>/dev/null
rm -f server.csr client.csr san.ext ca.srl
# Paths quoted for the shell that runs the printed commands (a DIR with spaces still works).
q() { printf '%q' "$out/$1"; }
echo "kubectl -n infscale create secret generic infscale-tls --from-file=tls.crt=$(q tls.crt) --from-file=tls.key=$(q tls.key) --from-file=ca.crt=$(q ca.crt)"
echo "kubectl -n $(printf '%q' "$model_ns") create secret generic infscale-client-tls --from-file=tls.crt=$(q client.crt) --from-file=tls.key=$(q client.key) --from-file=ca.crt=$(q ca.crt)"
