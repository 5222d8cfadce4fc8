#!/usr/bin/env bash
# Builds {{name}}.wasm, the policy component to name in the gateway's `policies[].plugin`.
# Installs the pinned componentize-js with `npm ci` when node_modules is missing or stale.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

stamp=node_modules/.package-lock.json   # npm writes it on every install
if [ ! -x node_modules/.bin/componentize-js ] || [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm ci --no-audit --no-fund
fi

# The gateway links no WASI: build a pure component (its only imports are the host's).
node_modules/.bin/componentize-js policy.js \
  --wit wit \
  --world-name policy-world \
  --disable stdio random clocks http fetch-event \
  --out {{name}}.wasm
echo "built {{name}}.wasm ($(du -k {{name}}.wasm | cut -f1) KiB)"
