#!/usr/bin/env bash
# Builds every example policy from source with its pinned toolchain (npm lockfile, pip
# hashes): injection-js/injection.wasm, names-python/names.wasm, and runs each one's own tests
# of its logic (node --test, unittest; the JS component also through jco). The integration tests (tests/it/examples.rs) put
# traffic through them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for example in injection-js names-python; do
    started=$(date +%s)
    "$here/$example/build.sh"
    echo "examples/policies/$example built in $(( $(date +%s) - started )) s"
done
(cd "$here/injection-js" && npm test --silent && npm run --silent test:component)
(cd "$here/names-python" && python3 -m unittest -q test_names)
