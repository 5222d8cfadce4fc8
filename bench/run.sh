#!/usr/bin/env bash
# Comparative benchmark on one machine: a zero-latency mock upstream (Rust), a do-nothing relay
# (the cost of one more hop on this machine), then Switchyard
# (openai adapter; anthropic adapter translating; answers from its response cache; a 1 KB prompt
# with and without the redact-pii policy), LiteLLM proxy (PyPI, in a venv) and Portkey
# gateway (npm), each with one upstream pointing at the mock, under the same load generator
# (hey). Gateways are pinned to core 0, the mock and the load to core 1. All traffic stays on
# 127.0.0.1; every loop is bounded in count and time. Prints one table (bench/report.py).
#   bench/run.sh                 everything
#   bench/run.sh --quick         shorter runs (smoke test of the harness)
#   bench/run.sh --soak MINUTES  also a full-load soak of Switchyard: RSS over time, then the
#                                size of its WAL, journal and database per logged request
#   bench/run.sh --only switchyard   skip installing and running the peers
#   AGENTGATEWAY=PATH HELICONE=PATH bench/run.sh   also agentgateway and Helicone's ai-gateway,
#                                binaries built from their sources (docs/performance.md)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
work="$root/bench/.work"
mkdir -p "$work"
quick=0; soak=0; only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --soak) soak="$2"; shift ;;
        --only) only="$2"; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
if [ "$quick" = 1 ]; then N_C1=300; FIXED=3s; STEP=2s; STREAMS=30; INFLIGHT=(1000 2000)
else N_C1=3000; FIXED=10s; STEP=5s; STREAMS=200; INFLIGHT=(5000 20000); fi

pin_gw="taskset -c 0"; pin_load="taskset -c 1"
[ "$(nproc)" -ge 2 ] || { pin_gw=""; pin_load=""; }

# ---- tools -------------------------------------------------------------------------------
if ! command -v hey >/dev/null || ! command -v wrk >/dev/null || ! command -v h2load >/dev/null; then
    apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hey wrk nghttp2-client >/dev/null
fi
ulimit -n 131072 2>/dev/null || ulimit -n 65536 2>/dev/null || true
# 20,000 in flight opens 40,000 loopback connections: widen the ephemeral range where allowed.
sysctl -qw net.ipv4.ip_local_port_range="1024 65000" 2>/dev/null || true
echo "building release binaries..." >&2
cargo build --release --quiet
cargo build --release --quiet --manifest-path bench/Cargo.toml
MOCK="$root/bench/target/release/mock"; PROBE="$root/bench/target/release/probe"

# Every server runs in its own session (setsid), so stopping it stops its workers too.
pids=()
cleanup() { for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
for port in 9100 9150 9200 9300 9400 9500 9600; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port is in use (a server left from an earlier run?): stop it first" >&2; exit 1
    fi
done

wait_port() {  # host:port, bounded to 60 s
    for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
    echo "nothing listens on port $1" >&2; return 1
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# The biggest RSS among a process and its children (LiteLLM and Portkey fork workers).
tree_rss_kb() { local total=0; for p in $1 $(pgrep -P "$1" 2>/dev/null); do total=$((total + $(rss_kb "$p"))); done; echo $total; }

# ---- the mock --------------------------------------------------------------------------------
setsid $pin_load "$MOCK" 9100 & pids+=($!); wait_port 9100

# ---- Switchyard ------------------------------------------------------------------------------
# A fresh database each run: the soak's disk figures are this run's alone.
rm -rf "$work/switchyard"; mkdir -p "$work/switchyard"
cat > "$work/switchyard/config.yaml" <<YAML
listen: 127.0.0.1:9200
data_dir: $work/switchyard/data
keys: [{name: bench, key: sk-bench, models: ['*']}]
policies: [{name: pii, plugin: redact-pii}]
affinity: {enabled: false}
server: {max_connections: 25000, max_in_flight: 25000}   # 20,000 in flight in the 1 s scenario
# stream_whole_answers: false — the mock answers a whole request at once but paces a stream
# (CHUNKS events INTERVAL_MS apart), so a whole answer fetched as a stream would measure the
# mock's pace, not the gateway's (against a real provider both take the generation's time).
sources:
  - name: openai
    base_url: http://127.0.0.1:9100/v1
    stream_whole_answers: false
    api_key: sk-upstream
    max_concurrent: 21000               # 20,000 in flight in the 1 s scenario
    timeout_seconds: 30
    models: [{name: bench}, {name: slow}]
  - name: openai-h2                     # the same mock over h2c: one connection for all
    base_url: http://127.0.0.1:9100/v1
    api_key: sk-upstream
    http_version: http2
    stream_whole_answers: false
    max_concurrent: 21000
    timeout_seconds: 30
    models: [{name: slow-h2, upstream: slow}]
  - name: openai-pii                    # the same mock behind the redact-pii policy (request and answer hooks)
    base_url: http://127.0.0.1:9100/v1
    api_key: sk-upstream
    stream_whole_answers: false
    max_concurrent: 21000
    policies: [pii]
    models: [{name: bench-pii, upstream: bench}]
  - name: openai-cached                 # the same mock, its answers cached: every request after the first is a hit
    base_url: http://127.0.0.1:9100/v1
    api_key: sk-upstream
    stream_whole_answers: false
    cache: true
    models: [{name: bench-cached, upstream: bench}]
  - name: claude
    base_url: http://127.0.0.1:9100/v1
    adapter: anthropic
    api_key: sk-upstream
    stream_whole_answers: false
    max_concurrent: 500
    models: [{name: bench-a, upstream: bench}]
YAML
start_switchyard() {
    SWITCHYARD_LOG=warn setsid $pin_gw "$root/target/release/switchyard" --config "$work/switchyard/config.yaml" \
        2>> "$work/switchyard/log" & sy=$!; pids+=($sy); wait_port 9200
}
start_switchyard

# The calibration hop: a do-nothing relay on the gateway's core (bench/src/bin/relay.rs).
setsid $pin_gw "$root/bench/target/release/relay" 9150 http://127.0.0.1:9100 & relay=$!; pids+=($relay); wait_port 9150

# ---- LiteLLM ---------------------------------------------------------------------------------
litellm=""
if [ -z "$only" ]; then
    if [ ! -x "$work/litellm/bin/litellm" ]; then
        echo "installing LiteLLM into a venv..." >&2
        python3 -m venv "$work/litellm" && "$work/litellm/bin/pip" install -q 'litellm[proxy]' >&2 || true
    fi
    if [ -x "$work/litellm/bin/litellm" ]; then
        cat > "$work/litellm.yaml" <<YAML
model_list:
  - model_name: bench
    litellm_params: {model: openai/bench, api_base: http://127.0.0.1:9100/v1, api_key: sk-upstream}
litellm_settings: {drop_params: true, telemetry: false}
general_settings: {master_key: sk-bench}
YAML
        LITELLM_LOG=ERROR setsid $pin_gw "$work/litellm/bin/litellm" --config "$work/litellm.yaml" --port 9300 \
            > "$work/litellm.log" 2>&1 & litellm=$!; pids+=($litellm)
        wait_port 9300 || litellm=""
    fi
fi

# ---- Portkey ---------------------------------------------------------------------------------
portkey=""
if [ -z "$only" ]; then
    if [ ! -d "$work/portkey/node_modules/@portkey-ai/gateway" ]; then
        echo "installing the Portkey gateway from npm..." >&2
        mkdir -p "$work/portkey" && (cd "$work/portkey" && npm install --silent @portkey-ai/gateway >&2) || true
    fi
    entry="$work/portkey/node_modules/@portkey-ai/gateway/build/start-server.js"
    if [ -f "$entry" ]; then
        setsid env --chdir="$work/portkey" $pin_gw node "$entry" --port=9400 --headless > "$work/portkey.log" 2>&1 &
        portkey=$!; pids+=($portkey)
        wait_port 9400 || portkey=""
    fi
fi

# ---- agentgateway and Helicone's ai-gateway ---------------------------------------------------
# Rust gateways built from their public sources (no release of either runs from a package
# here): give each binary's path, docs/performance.md says which versions and how they were built.
# Each routes the OpenAI chat model to the same mock, logging and tracing left at their defaults.
agentgateway=""
if [ -z "$only" ] && [ -n "${AGENTGATEWAY:-}" ]; then
    cat > "$work/agentgateway.yaml" <<YAML
binds:
- port: 9500
  listeners:
  - routes:
    - backends:
      - ai:
          name: openai
          hostOverride: 127.0.0.1:9100   # plain HTTP to the mock
          provider:
            openAI: {}
YAML
    setsid $pin_gw "$AGENTGATEWAY" -f "$work/agentgateway.yaml" > "$work/agentgateway.log" 2>&1 &
    agentgateway=$!; pids+=($agentgateway)
    wait_port 9500 || agentgateway=""
fi
helicone=""
if [ -z "$only" ] && [ -n "${HELICONE:-}" ]; then
    cat > "$work/helicone.yaml" <<YAML
server: {address: 127.0.0.1, port: 9600}
helicone: {features: none}        # nothing sent to Helicone, no Helicone key
telemetry: {level: warn, exporter: stdout}
providers:
  openai: {base-url: "http://127.0.0.1:9100/", models: [bench]}
YAML
    OPENAI_API_KEY=sk-upstream setsid $pin_gw "$HELICONE" -c "$work/helicone.yaml" > "$work/helicone.log" 2>&1 &
    helicone=$!; pids+=($helicone)
    wait_port 9600 || helicone=""
fi

# ---- measurements ----------------------------------------------------------------------------
results="$work/results"; rm -rf "$results"; mkdir -p "$results"
body='{"model":"bench","messages":[{"role":"user","content":"Hello"}]}'
body_a='{"model":"bench-a","messages":[{"role":"user","content":"Hello"}]}'
declare -A url pid hdr payload
url[direct]="http://127.0.0.1:9100/v1/chat/completions"; pid[direct]=""; payload[direct]="$body"
url[switchyard]="http://127.0.0.1:9200/v1/chat/completions"; pid[switchyard]=$sy; payload[switchyard]="$body"
url[switchyard-anthropic]="http://127.0.0.1:9200/v1/chat/completions"; pid[switchyard-anthropic]=$sy; payload[switchyard-anthropic]="$body_a"
url[relay]="http://127.0.0.1:9150/v1/chat/completions"; pid[relay]=$relay; payload[relay]="$body"
url[switchyard-cached]="http://127.0.0.1:9200/v1/chat/completions"; pid[switchyard-cached]=$sy
payload[switchyard-cached]='{"model":"bench-cached","messages":[{"role":"user","content":"Hello"}]}'
# Policies side by side: the same 1 KB prompt (no personal data in it, as in most traffic)
# through the openai source alone and through redact-pii.
prompt_1k=$(printf 'The quarterly report covers revenue, churn and the roadmap for next year. %.0s' $(seq 14))
url[switchyard-1k]="${url[switchyard]}"; pid[switchyard-1k]=$sy
payload[switchyard-1k]="{\"model\":\"bench\",\"messages\":[{\"role\":\"user\",\"content\":\"$prompt_1k\"}]}"
url[switchyard-pii]="${url[switchyard]}"; pid[switchyard-pii]=$sy
payload[switchyard-pii]="{\"model\":\"bench-pii\",\"messages\":[{\"role\":\"user\",\"content\":\"$prompt_1k\"}]}"
targets=(direct relay switchyard switchyard-anthropic switchyard-cached switchyard-1k switchyard-pii)
if [ -n "$litellm" ]; then url[litellm]="http://127.0.0.1:9300/v1/chat/completions"; pid[litellm]=$litellm; payload[litellm]="$body"; targets+=(litellm); fi
if [ -n "$portkey" ]; then
    url[portkey]="http://127.0.0.1:9400/v1/chat/completions"; pid[portkey]=$portkey; payload[portkey]="$body"
    hdr[portkey]="x-portkey-provider: openai|x-portkey-custom-host: http://127.0.0.1:9100/v1"; targets+=(portkey)
fi

if [ -n "$agentgateway" ]; then url[agentgateway]="http://127.0.0.1:9500/v1/chat/completions"; pid[agentgateway]=$agentgateway; payload[agentgateway]="$body"; targets+=(agentgateway); fi
# Helicone's unified API: its own path, the model named with its provider.
if [ -n "$helicone" ]; then
    url[helicone]="http://127.0.0.1:9600/ai/chat/completions"; pid[helicone]=$helicone
    payload[helicone]='{"model":"openai/bench","messages":[{"role":"user","content":"Hello"}]}'; targets+=(helicone)
fi

extra_headers() { IFS='|' read -ra hs <<< "${hdr[$1]:-}"; for h in "${hs[@]}"; do [ -n "$h" ] && printf '%s\n' "$h"; done; }

load() {  # target, output name, hey options...  (open loop: hey paces requests)
    local t="$1" out="$2"; shift 2
    local extra=()
    while IFS= read -r h; do extra+=(-H "$h"); done < <(extra_headers "$t")
    $pin_load hey "$@" -m POST -T application/json -H "Authorization: Bearer sk-bench" "${extra[@]}" \
        -d "${payload[$t]}" "${url[$t]}" > "$results/$t.$out.txt" 2>&1 || true
}

sweep() {  # target: closed-loop wrk at rising connection counts (the max-RPS search)
    local t="$1" script="$results/$t.wrk.lua"
    {
        echo 'wrk.method = "POST"'
        echo "wrk.body = [[${payload[$t]}]]"
        echo 'wrk.headers["Content-Type"] = "application/json"'
        echo 'wrk.headers["Authorization"] = "Bearer sk-bench"'
        extra_headers "$t" | while IFS=: read -r k v; do echo "wrk.headers[\"$k\"] = \"${v# }\""; done
    } > "$script"
    for c in 1 2 4 8 16 32 64 128; do
        $pin_load wrk -t1 -c"$c" -d"$STEP" --latency -s "$script" "${url[$t]}" > "$results/$t.wrk$c.txt" 2>&1 || true
        # Every step runs (bounded by STEP): a peer that misses 10 ms still shows its best rate.
    done
}

probe() {  # target, mode, count, body
    PROBE_HEADERS="${hdr[$1]:-}" $pin_load "$PROBE" "$2" "${url[$1]}" "$3" "$4" 2>/dev/null || echo '{}'
}

for t in "${targets[@]}"; do
    echo "measuring $t..." >&2
    [ -n "${pid[$t]}" ] && echo "$(tree_rss_kb "${pid[$t]}")" > "$results/$t.rss_idle"
    load "$t" warm -n 500 -c 4
    probe "$t" latency "$N_C1" "${payload[$t]}" > "$results/$t.c1.json"
    load "$t" fixed1k -z "$FIXED" -c 50 -q 20
    sweep "$t"
    [ -n "${pid[$t]}" ] && echo "$(tree_rss_kb "${pid[$t]}")" > "$results/$t.rss_load"
    # Asking for usage, as the mock always sends it: every target then passes the same events
    # (the gateway hides the usage chunk from clients that did not ask, stretching one gap).
    probe "$t" stream "$STREAMS" "${payload[$t]%\}},\"stream\":true,\"stream_options\":{\"include_usage\":true}}" > "$results/$t.stream.json"
done

# Thousands in flight against a 1 s upstream: two rounds each, peak RSS of each level (the
# peak is reset between levels), the adapter instances hosting them, and the pool once idle.
admin="Authorization: Bearer $(cat "$work/switchyard/data/admin_token")"
instances() {
    curl -s -H "$admin" http://127.0.0.1:9200/admin/api/adapters |
        python3 -c 'import json,sys; print(next(a["pool"]["instances"] for a in json.load(sys.stdin)["adapters"] if a["name"] == "openai"))'
}
payload[slow]='{"model":"slow","messages":[{"role":"user","content":"Hello"}]}'; url[slow]="${url[switchyard]}"
# A request in flight holds two descriptors in the gateway (its client's, its upstream's): a
# level the open-file limit cannot hold is measured at the largest it can, and the report says so.
nofile=$(ulimit -n)
# Each level's peak is its own: it runs on a gateway started afresh (the same database and
# compiled adapters), whose RSS before the level is printed beside the peak.
restart_switchyard() {
    kill -- "-$sy" 2>/dev/null || kill "$sy" 2>/dev/null || true
    wait "$sy" 2>/dev/null || true
    start_switchyard > /dev/null
    load switchyard restart -n 100 -c 4
    rss_kb "$sy"
}
for want in "${INFLIGHT[@]}"; do
    c=$want; fit=$(( (nofile - 1000) / 2 ))
    if [ "$c" -gt "$fit" ]; then c=$fit; echo "$want $nofile" > "$results/inflight$c.capped"; fi
    echo "1 s upstream, $c in flight..." >&2
    restart_switchyard > "$results/inflight$c.rss_before"
    ( sleep 1.5; instances > "$results/inflight$c.instances" ) & sampler=$!
    load slow "inflight$c" -n $((c * 2)) -c "$c" -t 30
    wait "$sampler" || true
    echo "$(hwm_kb "$sy")" > "$results/inflight$c.rss_peak"
done
# The same levels over HTTP/2 on both hops (h2load, 200 streams a connection; the source
# `openai-h2`): a request in flight then holds a stream, not a descriptor, and the open-file
# limit caps nothing.
printf '%s' '{"model":"slow-h2","messages":[{"role":"user","content":"Hello"}]}' > "$results/slow-h2.json"
for c in "${INFLIGHT[@]}"; do
    echo "1 s upstream over HTTP/2, $c in flight..." >&2
    restart_switchyard > "$results/h2inflight$c.rss_before"
    ( sleep 1.5; instances > "$results/h2inflight$c.instances" ) & sampler=$!
    $pin_load h2load -n $((c * 2)) -c $(( (c + 199) / 200 )) -m 200 -H "authorization: Bearer sk-bench" \
        -H "content-type: application/json" -d "$results/slow-h2.json" \
        "${url[switchyard]}" > "$results/h2inflight$c.txt" 2>&1 || true
    wait "$sampler" || true
    echo "$(hwm_kb "$sy")" > "$results/h2inflight$c.rss_peak"
done
if [ "$quick" = 0 ]; then
    echo "waiting for idle instances to be let go..." >&2
    sleep 80; instances > "$results/inflight.instances_idle"
fi

# Soak: bounded, RSS every 10 s.
if [ "$soak" != 0 ]; then
    echo "soak: $soak min at full load..." >&2
    data="$work/switchyard/data"
    size() { stat -c %s "$1" 2>/dev/null || echo 0; }
    ( for _ in $(seq $((soak * 6))); do
        echo "$(date +%s) $(rss_kb "$sy") $(size "$data/state.db-wal") $(size "$data/state.journal")"; sleep 10
      done ) > "$results/soak.rss" &
    sampler=$!
    load switchyard soak -z "${soak}m" -c 50
    wait "$sampler" || true
    sleep 1   # the writer trails the journal by its 20 ms batch window
    python3 - "$data/state.db" > "$results/soak.disk" <<'PY'
import os, sqlite3, sys
db = sys.argv[1]
rows = sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("select count(*) from request_logs").fetchone()[0]
size = lambda p: os.path.getsize(p) if os.path.exists(p) else 0
print(rows, size(db), size(db + "-wal"), size(db.removesuffix(".db") + ".journal"))
PY
fi

python3 "$root/bench/report.py" "$results" "$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
