#!/usr/bin/env bash
# What metrics cost: the same release gateway twice, metrics on (the default) and off
# (`metrics: {enabled: false}`), in front of the bench's zero-latency mock. Both gateways are
# pinned to core 0 and loaded at the same time (one closed-loop wrk each, with the mock, on
# core 1): they share that core fairly, so whatever else the machine does hits both alike, and
# the one whose requests cost more CPU serves fewer. Prints each round's requests per second
# and the gateway's own CPU time per request (from /proc), and the medians of the rounds'
# differences.
# `aa` as the fourth argument turns metrics off on both: the same run then shows how far the
# two places differ by themselves (port, start order), the noise floor of the figure.
#   bench/metrics-cost.sh [ROUNDS] [SECONDS] [CONNECTIONS] [aa]
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rounds="${1:-5}"; seconds="${2:-10}"; connections="${3:-32}"; mode="${4:-}"
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
if [ "$mode" = aa ]; then start on 9211 "metrics: {enabled: false}"; else start on 9211 ""; fi
start off 9212 "metrics: {enabled: false}"

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"Say hello in one short sentence, please."}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
LUA
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# One round against both ports at once: "RPS-ON CPU-ON RPS-OFF CPU-OFF" (CPU in µs per request).
round() {
    local hz t_on t_off
    hz=$(getconf CLK_TCK)
    t_on=$(cpu_ticks "${gw[9211]}"); t_off=$(cpu_ticks "${gw[9212]}")
    taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:9211/v1/chat/completions" > "$work/on.out" &
    local a=$!
    taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:9212/v1/chat/completions" > "$work/off.out" &
    local b=$!
    wait "$a" "$b"
    t_on=$(( $(cpu_ticks "${gw[9211]}") - t_on )); t_off=$(( $(cpu_ticks "${gw[9212]}") - t_off ))
    for side in on off; do
        local out requests rate ticks
        out=$(cat "$work/$side.out")
        requests=$(awk '/requests in/ {print $1}' <<< "$out"); rate=$(awk '/Requests\/sec/ {print int($2)}' <<< "$out")
        if [ "$side" = on ]; then ticks=$t_on; else ticks=$t_off; fi
        printf '%s %s ' "$rate" "$(awk -v t="$ticks" -v hz="$hz" -v n="$requests" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')"
    done
    echo
}
# Warm both (compiled adapters, pools, connections).
round >/dev/null
d_rps=(); d_cpu=(); on=(); off=(); on_cpu=(); off_cpu=()
for r in $(seq "$rounds"); do
    read -r a a_cpu b b_cpu < <(round)
    on+=("$a"); off+=("$b"); on_cpu+=("$a_cpu"); off_cpu+=("$b_cpu")
    d_rps+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", (b-a)*100/b}')")
    d_cpu+=("$(awk -v a="$a_cpu" -v b="$b_cpu" 'BEGIN {printf "%.2f", (a-b)*100/b}')")
    echo "round $r: metrics on $a rps ($a_cpu µs CPU/request), off $b rps ($b_cpu µs CPU/request): on costs ${d_rps[-1]} % of throughput, ${d_cpu[-1]} % CPU"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "median: metrics on $(median "${on[@]}") rps, $(median "${on_cpu[@]}") µs CPU/request; off $(median "${off[@]}") rps, $(median "${off_cpu[@]}") µs CPU/request"
echo "metrics cost (median of the rounds): $(median "${d_rps[@]}") % of throughput, $(median "${d_cpu[@]}") % CPU per request (spread $(printf '%s\n' "${d_rps[@]}" | sort -g | head -1) .. $(printf '%s\n' "${d_rps[@]}" | sort -g | tail -1) %)"
