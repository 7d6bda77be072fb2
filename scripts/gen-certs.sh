#!/usr/bin/env bash
# A CA, a server certificate for infscale.infscale.svc and a client certificate for KEDA, for
# manifests/scaler-tls (run by hand; needs openssl). Writes them to ${1:-certs}/ and prints the
# kubectl commands that make the two Secrets.
set -euo pipefail
out=${1:-certs}
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
echo "kubectl -n infscale create secret generic infscale-tls --from-file=tls.crt --from-file=tls.key --from-file=ca.crt"
echo "kubectl -n llm create secret generic infscale-client-tls --from-file=tls.crt=client.crt --from-file=tls.key=client.key --from-file=ca.crt"
