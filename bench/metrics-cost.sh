#!/usr/bin/env bash
# What metrics cost: the same release gateway twice, metrics on (the default) and off
# (`metrics: {enabled: false}`), in front of the bench's zero-latency mock, each pinned to core 0
# with the load (wrk, closed loop) and the mock on core 1. Rounds alternate the two so drift
# on a noisy machine hits both; prints each round's requests per second and the medians.
#   bench/metrics-cost.sh [ROUNDS] [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rounds="${1:-5}"; seconds="${2:-10}"; connections="${3:-32}"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

cargo build --release --quiet
cargo build --release --quiet --manifest-path bench/Cargo.toml
command -v wrk >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

wait_port() { for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

taskset -c 1 bench/target/release/mock 9101 & pids+=($!); wait_port 9101
start() {  # name, port, extra config
    mkdir -p "$work/$1"
    cat > "$work/$1/config.yaml" <<YAML
listen: 127.0.0.1:$2
data_dir: $work/$1/data
admin_token: ''
keys: [{name: bench, key: sk-bench, models: ['*']}]
affinity: {enabled: false}
$3
sources:
  - {name: openai, base_url: 'http://127.0.0.1:9101/v1', api_key: sk-upstream, max_concurrent: 500, models: [{name: bench}]}
YAML
    SWITCHYARD_LOG=warn taskset -c 0 target/release/switchyard --config "$work/$1/config.yaml" 2>"$work/$1/log" &
    pids+=($!); wait_port "$2"
}
start on 9211 ""
start off 9212 "metrics: {enabled: false}"

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"Say hello in one short sentence, please."}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
LUA
rps() { taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:$1/v1/chat/completions" \
    | awk '/Requests\/sec/ {print int($2)}'; }
# Warm both (compiled adapters, pools, connections).
rps 9211 >/dev/null; rps 9212 >/dev/null
on=(); off=()
for r in $(seq "$rounds"); do
    a=$(rps 9211); b=$(rps 9212)
    on+=("$a"); off+=("$b")
    echo "round $r: metrics on $a rps, off $b rps"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
m_on=$(median "${on[@]}"); m_off=$(median "${off[@]}")
echo "median: metrics on $m_on rps, off $m_off rps; on costs $(awk -v a="$m_on" -v b="$m_off" 'BEGIN {printf "%.1f", (b-a)*100/b}') %"
