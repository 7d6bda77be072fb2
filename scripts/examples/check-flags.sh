#!/usr/bin/env bash
# Checks that every flag, environment variable, probe path, metrics path and options-file key that
# manifests/examples/*.yaml pass to their model servers exists in the pinned version of that server
# (scripts/examples/pins.tsv maps each image to the package carrying its source). Downloads the
# servers' packages once into target/examples-check/ (about 360 MB; later runs read the cache).
#   scripts/examples/check-flags.sh [EXAMPLE.yaml...]
# Prints one line per model-server container with the number of items checked; exits non-zero
# naming the example, container and item that does not exist.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${EXAMPLES_CHECK_CACHE:-target/examples-check}
mkdir -p "$cache"
if ! python3 -c 'import yaml' 2>/dev/null; then
  python3 -m pip install -q pyyaml 2>/dev/null \
    || python3 -m pip install -q --break-system-packages pyyaml
fi
exec python3 scripts/examples/check_flags.py --cache "$cache" "$@"
