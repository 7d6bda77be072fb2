#!/usr/bin/env bash
# Checks that every flag, environment variable, probe path, metrics path and options-file key that
# manifests/examples/*.yaml pass to their model servers exists in the pinned version of that server
# (scripts/examples/pins.tsv maps each image to the package carrying its source). Downloads the
# servers' packages once into target/examples-check/ (356 MB, about 20 s; later runs read the
# cache in under a second). The emulate example is checked against this tree's
# `infscale emulate --help` (built if missing).
#   scripts/examples/check-flags.sh [EXAMPLE.yaml...]
# Prints one line per model-server container with the number of items checked; exits non-zero
# naming the example, container and item that does not exist.
set -euo pipefail
files=()
for f in "$@"; do
  case $f in -*) files+=("$f") ;; *) files+=("$(realpath -m "$f")") ;; esac
done
cd "$(dirname "$0")/../.."
cache=${EXAMPLES_CHECK_CACHE:-target/examples-check}
mkdir -p "$cache"
# pip (to download the servers' packages; nothing is installed from them) and PyYAML.
if ! python3 -m pip --version >/dev/null 2>&1; then
  apt-get install -y -q --no-install-recommends python3-pip
fi
if ! python3 -c 'import yaml' 2>/dev/null; then
  python3 -m pip install -q pyyaml 2>/dev/null \
    || python3 -m pip install -q --break-system-packages pyyaml
fi
exec python3 scripts/examples/check_flags.py --cache "$cache" "${files[@]}"
