#!/usr/bin/env bash
# Builds cohere.wasm (a WebAssembly component for Switchyard's adapter world) from adapter.js.
# Works from any directory; installs the pinned toolchain with `npm ci` when node_modules is
# missing or older than package-lock.json.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
wit="$(cd "$here/../../../wit" && pwd)"
cd "$here"

stamp=node_modules/.package-lock.json   # npm writes it on every install
if [ ! -x node_modules/.bin/componentize-js ] || [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm ci --no-audit --no-fund
fi

# The host links no WASI (no wasi:http, no clocks, no random, no stdio): build a pure
# component whose only imports are switchyard:adapter/host and types.
node_modules/.bin/componentize-js adapter.js \
  --wit "$wit" \
  --world-name adapter-world \
  --disable stdio random clocks http fetch-event \
  --out cohere.wasm
echo "built $here/cohere.wasm ($(wc -c < cohere.wasm) bytes)"
