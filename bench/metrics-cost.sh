#!/usr/bin/env bash
# What metrics cost: the same release gateway twice, metrics on (the default) and off
# (`metrics: {enabled: false}`), in front of the bench's zero-latency mock, each pinned to core 0
# with the load (wrk, closed loop) and the mock on core 1. Rounds alternate the two so drift
# on a noisy machine hits both; prints each round's requests per second and the gateway's own
# CPU time per request (from /proc: steadier than throughput on a shared machine), and medians.
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
    pids+=($!); gw[$2]=$!; wait_port "$2"
}
declare -A gw
start on 9211 ""
start off 9212 "metrics: {enabled: false}"

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"Say hello in one short sentence, please."}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
LUA
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# One round against port $1: "RPS CPU-µs-per-request".
rps() {
    local before after out
    before=$(cpu_ticks "${gw[$1]}")
    out=$(taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:$1/v1/chat/completions")
    after=$(cpu_ticks "${gw[$1]}")
    local requests rate hz
    requests=$(awk '/requests in/ {print $1}' <<< "$out"); rate=$(awk '/Requests\/sec/ {print int($2)}' <<< "$out")
    hz=$(getconf CLK_TCK)
    echo "$rate $(awk -v t=$((after - before)) -v hz="$hz" -v n="$requests" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')"
}
# Warm both (compiled adapters, pools, connections).
rps 9211 >/dev/null; rps 9212 >/dev/null
on=(); off=(); on_cpu=(); off_cpu=()
for r in $(seq "$rounds"); do
    read -r a a_cpu < <(rps 9211); read -r b b_cpu < <(rps 9212)
    on+=("$a"); off+=("$b"); on_cpu+=("$a_cpu"); off_cpu+=("$b_cpu")
    echo "round $r: metrics on $a rps ($a_cpu µs CPU/request), off $b rps ($b_cpu µs CPU/request)"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
m_on=$(median "${on[@]}"); m_off=$(median "${off[@]}")
c_on=$(median "${on_cpu[@]}"); c_off=$(median "${off_cpu[@]}")
echo "median: metrics on $m_on rps, off $m_off rps (on costs $(awk -v a="$m_on" -v b="$m_off" 'BEGIN {printf "%.1f", (b-a)*100/b}') % of throughput)"
echo "median CPU per request: on $c_on µs, off $c_off µs (on costs $(awk -v a="$c_on" -v b="$c_off" 'BEGIN {printf "%.1f", (a-b)*100/b}') %)"
