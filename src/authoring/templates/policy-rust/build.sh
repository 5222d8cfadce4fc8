#!/usr/bin/env bash
# Builds {{name}}.wasm, the policy component to name in the gateway's `policies[].plugin`.
set -euo pipefail
cd "$(dirname "$0")"
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
cargo build --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{ident}}.wasm" {{name}}.wasm
echo "built {{name}}.wasm ($(du -k {{name}}.wasm | cut -f1) KiB)"
