#!/usr/bin/env bash
# Builds every example adapter from source with its pinned toolchain (npm lockfile, pip
# hashes, wit-bindgen 0.63): cohere-js/cohere.wasm, azure-python/azure.wasm,
# hmac-c/hmac-openai.wasm. The integration tests serve traffic through them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for example in cohere-js azure-python hmac-c; do
    started=$(date +%s)
    "$here/$example/build.sh"
    echo "examples/adapters/$example built in $(( $(date +%s) - started )) s"
done
