#!/usr/bin/env bash
# Builds {{name}}.wasm, the policy component to name in the gateway's `policies[].plugin`.
# Installs the pinned componentize-py into .venv (with --require-hashes) when it is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/componentize-py ]; then
  "$python" -m venv .venv
  .venv/bin/pip install --quiet --require-hashes -r requirements.txt
fi

# bindings/ is a copy of the generated `wit_world` package for editors and type checkers; the
# build generates its own.
rm -rf bindings
.venv/bin/componentize-py -d wit -w policy-world bindings bindings >/dev/null
# The gateway links no WASI: --stub-wasi leaves the host's interfaces as the only imports.
.venv/bin/componentize-py -d wit -w policy-world componentize --stub-wasi app -o {{name}}.wasm
echo "built {{name}}.wasm ($(du -k {{name}}.wasm | cut -f1) KiB)"
