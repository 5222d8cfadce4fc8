#!/usr/bin/env bash
# Builds injection.wasm (a WebAssembly component for Switchyard's policy world) from policy.js.
# Works from any directory; installs the pinned toolchain with `npm ci` when node_modules is
# missing or older than package-lock.json (from npm's cache when it has the packages).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
wit="$(cd "$here/../../../wit/policy" && pwd)"
cd "$here"

stamp=node_modules/.package-lock.json   # npm writes it on every install
if [ ! -x node_modules/.bin/componentize-js ] || [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm ci --no-audit --no-fund --prefer-offline
fi

# The host links no WASI (no wasi:http, no clocks, no random, no stdio): build a pure
# component whose only import is switchyard:policy/host (and the types it uses).
node_modules/.bin/componentize-js policy.js \
  --wit "$wit" \
  --world-name policy-world \
  --disable stdio random clocks http fetch-event \
  --out injection.wasm
echo "built $here/injection.wasm ($(wc -c < injection.wasm) bytes)"
