#!/usr/bin/env bash
# What an adapter costs by the language it is written in: for the built-in openai (Rust), the
# C, JavaScript and Python examples and the bundled Lua openai script, the release binary's
# `switchyard adapter check` measures component size, compile time (no cache), start from the
# compile cache, a cold instance, transform-request on a sample chat request, transform-stream-
# chunk over the example's longest recorded stream, and the memory a pooled instance keeps.
# Needs examples/adapters/build.sh to have run. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --bin switchyard >&2
bin=target/release/switchyard
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT

# name | language | file or built-in | cases | settings
rows=(
  "openai|Rust|target/guests/wasm32-wasip2/release/openai.wasm|plugins/openai/cases|"
  "hmac-openai|C|examples/adapters/hmac-c/hmac-openai.wasm|examples/adapters/hmac-c/cases|signing_secret=bench"
  "cohere|JavaScript|examples/adapters/cohere-js/cohere.wasm|examples/adapters/cohere-js/cases|"
  "azure|Python|examples/adapters/azure-python/azure.wasm|examples/adapters/azure-python/cases|"
  "lua-openai|Lua|adapters-lua-compat/scripts/openai.lua|plugins/openai/cases|"
)

field() { # the number on the report line starting with $1, or "-"
  awk -v key="$1" 'index($0, key) == 1 { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }' <<<"$2" | grep . || echo "-"
}

echo "| adapter | language | size (KiB) | compile (ms) | cached start (ms) | cold instance (ms) | per request (µs) | per stream event (µs) | memory per instance (MiB) |"
echo "|---|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  IFS='|' read -r name lang target cases setting <<<"$row"
  args=(adapter check "$target" --cases "$cases")
  [ -n "$setting" ] && args+=(--setting "$setting")
  cold=$("$bin" "${args[@]}" --no-cache || true)
  warm=$("$bin" "${args[@]}" --cache-dir "$cache" >/dev/null; "$bin" "${args[@]}" --cache-dir "$cache" || true)
  size=$(field "size" "$cold")
  if [ "$size" = "-" ] && [ -f "$target" ]; then size=$(( $(stat -c %s "$target") / 1024 )); fi
  echo "| $name | $lang | $size | $(field load "$cold") | $(field load "$warm") | $(field cold "$warm") | $(field "per call" "$warm") | $(field "per event" "$warm") | $(field memory "$warm") |"
done
