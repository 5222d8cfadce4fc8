#!/usr/bin/env bash
# What a setting costs: the same release gateway twice, config A and config B, in front of the
# bench's zero-latency mock. Both are pinned to core 0 and loaded at the same time (one
# closed-loop wrk each, with the mock, on core 1): they share that core fairly, so whatever
# else the machine does hits both alike, and the one whose requests cost more CPU serves fewer.
# Prints each round's requests per second and the gateway's own CPU time per request (from
# /proc), and the medians of the rounds' differences. Two equal configs show the noise floor.
#   bench/ab.sh LABEL_A CONFIG_A LABEL_B CONFIG_B [ROUNDS] [SECONDS] [CONNECTIONS]
# CONFIG_* are lines added to the gateway's config (e.g. "metrics: {enabled: false}");
# KEY_EXTRA and SOURCE_EXTRA, fields added to both sides' key and source (", rpm: 1000000").
# BIN_A and BIN_B: another gateway binary for a side (two builds compared; default: this one's).
# The log is the config's; SWITCHYARD_LOG sets it on both sides, LOG_A and LOG_B on one.
set -euo pipefail
cd "$(dirname "$0")/.."
label_a="$1"; extra_a="$2"; label_b="$3"; extra_b="$4"
rounds="${5:-5}"; seconds="${6:-10}"; connections="${7:-32}"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

cargo build --release --quiet
cargo build --release --quiet --manifest-path bench/Cargo.toml
command -v wrk >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

wait_port() { for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

taskset -c 1 bench/target/release/mock 9101 & pids+=($!); wait_port 9101
start() {  # side, port, extra config
    mkdir -p "$work/$1"
    cat > "$work/$1/config.yaml" <<YAML
listen: 127.0.0.1:$2
data_dir: $work/$1/data
admin_token: ''
keys: [{name: bench, key: sk-bench, models: ['*']${KEY_EXTRA:-}}]
affinity: {enabled: false}
$3
sources:
  # The mock paces streams: a whole answer asked as one would measure its pace (see run.sh).
  - {name: openai, base_url: 'http://127.0.0.1:9101/v1', api_key: sk-upstream, max_concurrent: 500, stream_whole_answers: false${SOURCE_EXTRA:-}, models: [{name: bench}]}
YAML
    local bin=target/release/switchyard
    local log="${SWITCHYARD_LOG:-}"
    if [ "$1" = a ]; then bin="${BIN_A:-$bin}"; log="${LOG_A:-$log}"; else bin="${BIN_B:-$bin}"; log="${LOG_B:-$log}"; fi
    env ${log:+SWITCHYARD_LOG=$log} taskset -c 0 "$bin" --config "$work/$1/config.yaml" 2>"$work/$1/log" &
    pids+=($!); gw[$1]=$!; wait_port "$2"
}
declare -A gw
start a 9211 "$extra_a"
start b 9212 "$extra_b"

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"bench","messages":[{"role":"user","content":"Say hello in one short sentence, please."}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
LUA
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# One round against both at once: "RPS-A CPU-A RPS-B CPU-B" (CPU in µs per request).
round() {
    local hz t_a t_b
    hz=$(getconf CLK_TCK)
    t_a=$(cpu_ticks "${gw[a]}"); t_b=$(cpu_ticks "${gw[b]}")
    taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:9211/v1/chat/completions" > "$work/a.out" &
    local wa=$!
    taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:9212/v1/chat/completions" > "$work/b.out" &
    local wb=$!
    wait "$wa" "$wb"
    t_a=$(( $(cpu_ticks "${gw[a]}") - t_a )); t_b=$(( $(cpu_ticks "${gw[b]}") - t_b ))
    for side in a b; do
        local out requests rate ticks errors
        out=$(cat "$work/$side.out")
        errors=$(awk '/Non-2xx/ {print $NF}' <<< "$out")
        [ -z "$errors" ] || { echo "side $side answered $errors non-2xx responses" >&2; cat "$work/$side/log" >&2; exit 1; }
        requests=$(awk '/requests in/ {print $1}' <<< "$out"); rate=$(awk '/Requests\/sec/ {print int($2)}' <<< "$out")
        if [ "$side" = a ]; then ticks=$t_a; else ticks=$t_b; fi
        printf '%s %s ' "$rate" "$(awk -v t="$ticks" -v hz="$hz" -v n="$requests" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')"
    done
    echo
}
# Warm both (compiled adapters, pools, connections).
round >/dev/null
d_rps=(); d_cpu=(); ra=(); rb=(); ca=(); cb=()
for r in $(seq "$rounds"); do
    read -r a a_cpu b b_cpu < <(round)
    ra+=("$a"); rb+=("$b"); ca+=("$a_cpu"); cb+=("$b_cpu")
    d_rps+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", (b-a)*100/b}')")
    d_cpu+=("$(awk -v a="$a_cpu" -v b="$b_cpu" 'BEGIN {printf "%.2f", (a-b)*100/b}')")
    echo "round $r: $label_a $a rps ($a_cpu µs CPU/request), $label_b $b rps ($b_cpu µs CPU/request): $label_a costs ${d_rps[-1]} % of throughput, ${d_cpu[-1]} % CPU"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo "median: $label_a $(median "${ra[@]}") rps, $(median "${ca[@]}") µs CPU/request; $label_b $(median "${rb[@]}") rps, $(median "${cb[@]}") µs CPU/request"
echo "$label_a over $label_b (median of the rounds): $(median "${d_rps[@]}") % of throughput, $(median "${d_cpu[@]}") % CPU per request (spread $(printf '%s\n' "${d_rps[@]}" | sort -g | head -1) .. $(printf '%s\n' "${d_rps[@]}" | sort -g | tail -1) %)"
