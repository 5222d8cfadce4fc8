#!/usr/bin/env bash
# Builds names.wasm from app.py with componentize-py, in a venv of its own (.venv).
# Works from any directory; the WIT is the gateway's policy world, three levels up.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
wit="$here/../../../wit/policy"
venv="$here/.venv"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/componentize-py" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --require-hashes -r "$here/requirements.txt"
fi

cd "$here"
# The bindings are generated into the build; `bindings` below writes a copy for editors and
# type checkers only (ignored by git).
rm -rf "$here/bindings"
"$venv/bin/componentize-py" -d "$wit" -w policy-world bindings "$here/bindings" >/dev/null
"$venv/bin/componentize-py" -d "$wit" -w policy-world componentize --stub-wasi app -o "$here/names.wasm"
ls -l "$here/names.wasm"
