#!/usr/bin/env bash
# Builds every example adapter from source with its pinned toolchain (npm lockfile, pip
# hashes, wit-bindgen 0.63): cohere-js/cohere.wasm, azure-python/azure.wasm,
# hmac-c/hmac-openai.wasm, and runs each one's own tests of its mapping (node --test, unittest;
# hmac-c's build runs its native tests). The integration tests serve traffic through them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for example in cohere-js azure-python hmac-c; do
    started=$(date +%s)
    "$here/$example/build.sh"
    echo "examples/adapters/$example built in $(( $(date +%s) - started )) s"
done
(cd "$here/cohere-js" && npm test --silent)
(cd "$here/azure-python" && python3 -m unittest -q test_azure_mapping)
