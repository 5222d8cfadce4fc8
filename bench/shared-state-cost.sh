#!/usr/bin/env bash
# What replicas' shared state costs: the release gateway with `shared_state` on a loopback
# redis-server (Debian's package) against the same gateway alone, by bench/ab.sh.
#   bench/shared-state-cost.sh [ROUNDS] [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
port=9379
taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
redis=$!
trap 'kill $redis 2>/dev/null || true' EXIT
# The key has a quota and the source an rpm, so every request counts in Redis-shared windows.
KEY_EXTRA=", token_quota: 1000000000000, period: month" SOURCE_EXTRA=", rpm: 1000000000" \
    bench/ab.sh "redis" "shared_state: redis://127.0.0.1:$port/0" "alone" "" "$@"
