#!/usr/bin/env bash
# The WebUI's weight and the overview's time to first render over a big log: the release
# binary on 127.0.0.1 with 100,000 request-log rows spread over 7 days (seeded into its
# state.db), the overview opened 5 times in headless Chromium (playwright-core from
# tests/browser). Prints the UI's gzipped size and the render times.
#   bench/webui/overview.sh [ROWS]
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
rows="${1:-100000}"
work="$(mktemp -d)"
trap 'kill "$gw" 2>/dev/null || true; rm -rf "$work"' EXIT

cargo build --release --quiet
[ -d tests/browser/node_modules/playwright-core ] || npm ci --prefix tests/browser --silent

gz=0
while IFS= read -r -d '' f; do gz=$((gz + $(gzip -9c "$f" | wc -c))); done < <(find webui -type f ! -name '*.md' -print0)
raw=$(find webui -type f ! -name '*.md' -print0 | du -cb --files0-from=- | tail -1 | cut -f1)
echo "webui: $raw bytes, $gz bytes gzipped (each file gzip -9)"

port=$((20000 + RANDOM % 20000))
cat > "$work/config.yaml" <<YAML
listen: 127.0.0.1:$port
admin_token: bench-admin-token-0123456789
data_dir: $work/data
keys: [{name: bench, key: sk-bench-key-0123456789, models: ['*']}]
sources:
  - {name: alpha, base_url: 'http://127.0.0.1:9/v1', models: [{name: gpt-4o-mini}, {name: gpt-4o}]}
  - {name: beta, base_url: 'http://127.0.0.1:9/v1', models: [{name: gpt-4o-mini}]}
YAML
start() {
    target/release/switchyard --config "$work/config.yaml" 2>"$work/log" &
    gw=$!
    for _ in $(seq 100); do curl -sf "127.0.0.1:$port/health" >/dev/null && return; sleep 0.1; done
    echo "the gateway did not start:" >&2; cat "$work/log" >&2; exit 1
}
start; kill "$gw"; wait "$gw" 2>/dev/null || true
python3 "$root/bench/webui/seed.py" "$work/data/state.db" "$rows"
start
node bench/webui/overview.mjs "http://127.0.0.1:$port" bench-admin-token-0123456789 5
