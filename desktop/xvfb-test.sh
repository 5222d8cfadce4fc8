#!/usr/bin/env bash
# The desktop app end to end, as a person would use it, on a virtual X display (Xvfb) with a
# window manager (openbox), its own D-Bus session and a fresh data folder:
#   the first-run page, chosen by keyboard; the WebUI shown logged in (the page's own report and
#   a screenshot); closing the window keeps serving; a second launch shows the first's window and
#   exits; an alert reaches the notification service; every tray action through the tray's
#   functions (a second launch with --self-test-actions), Quit last; idle RSS and start time.
# Usage: desktop/xvfb-test.sh [BINARY]   (default target/release/switchyard-desktop)
#   SHOTS=docs/gui   also writes the screenshots there (first-run.png, window.png).
# Needs Debian's xvfb, openbox, wmctrl, xdotool, imagemagick, dbus, curl (desktop/xvfb-test.sh
# installs none of them: see docs/gui.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# One D-Bus session for the whole test: the single-instance name, notifications, the tray.
if [ -z "${SWITCHYARD_TEST_IN_DBUS:-}" ]; then
    SWITCHYARD_TEST_IN_DBUS=1 exec dbus-run-session -- "$0" "$@"
fi

BIN=$(realpath "${1:-target/release/switchyard-desktop}")
SHOTS=${SHOTS:-}
[ -z "$SHOTS" ] || { mkdir -p "$SHOTS"; SHOTS=$(realpath "$SHOTS"); }
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "FAILED: $*" >&2
    echo "--- app stdout" >&2; cat "$work/out.log" >&2 || true
    echo "--- app stderr (last 40 lines)" >&2; tail -n 40 "$work/err.log" >&2 || true
    exit 1
}
# Waits (at most $2 s) until command $1 succeeds.
wait_for() {
    local deadline=$((SECONDS + $2))
    until eval "$1"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}

# A home of its own: data folder, autostart entries, config; the compiled-adapter cache is the
# user's (a cold one only makes the first start slower).
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}
export HOME=$work/home XDG_DATA_HOME=$work/home/data XDG_CONFIG_HOME=$work/home/config
mkdir -p "$HOME" "$work/bin"
# WebKitGTK on a virtual display: software rendering; as root its bubblewrap sandbox cannot start.
export WEBKIT_DISABLE_DMABUF_RENDERER=1 WEBKIT_DISABLE_COMPOSITING_MODE=1 LIBGL_ALWAYS_SOFTWARE=1
export NO_AT_BRIDGE=1 GDK_BACKEND=x11
if [ "$(id -u)" = 0 ]; then export WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS=1; fi
# "Open data folder" records what it was asked to open instead of starting a file manager.
printf '#!/bin/sh\nprintf "%%s\\n" "$@" >> %s/opened\n' "$work" > "$work/bin/record-open"
chmod +x "$work/bin/record-open"
export SWITCHYARD_DESKTOP_OPEN_WITH=$work/bin/record-open SWITCHYARD_DESKTOP_ALERT_SECONDS=1

display=:$((90 + RANDOM % 9))
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp &
pids+=($!)
export DISPLAY=$display
wait_for "xdpyinfo >/dev/null 2>&1 || xdotool getmouselocation >/dev/null 2>&1" 10 || fail "Xvfb did not start"
openbox &
pids+=($!)
dbus-monitor --session "interface='org.freedesktop.Notifications',member='Notify'" > "$work/notify.log" 2>&1 &
pids+=($!)

data=$XDG_DATA_HOME/dev.switchyard.desktop

# 1. First run: the page offers the starting configs; Tab, Enter picks the first (the example).
"$BIN" --self-test > "$work/out.log" 2> "$work/err.log" &
app=$!
pids+=($app)
wait_for "xdotool search --onlyvisible --name '^Switchyard\$' >/dev/null" 60 || fail "no window"
wid=$(xdotool search --onlyvisible --name '^Switchyard$' | head -1)
wait_for "[ -d '$data' ]" 10 || fail "no data folder"
[ ! -e "$data/config.yaml" ] || fail "a config before the first run"
sleep 1 # the page paints (nothing to wait on from outside)
[ -z "$SHOTS" ] || import -window root "$SHOTS/first-run.png"
xdotool windowactivate --sync "$wid" key --clearmodifiers Tab Return
wait_for "grep -q '^SELFTEST webui' '$work/out.log'" 90 || fail "the WebUI did not report"

# 2. The WebUI in the window, logged in: its shell, no login form, and the admin API took the
#    token the page holds.
report=$(grep -m1 '^SELFTEST webui' "$work/out.log")
for want in '"shell":true' '"login":false' '"token":true' '"errors":[]' '"admin_status":200'; do
    [[ $report == *"$want"* ]] || fail "the page reports $report, not $want"
done
base=$(grep -m1 '^SELFTEST gateway' "$work/out.log" | sed 's/.*base_url=\([^ ]*\).*/\1/')
start_ms=$(sed 's/.*start_ms=\([0-9-]*\).*/\1/' <<< "$report")
echo "WebUI shown logged in at $base/ui/, ${start_ms} ms after the process started"
[ "$(stat -c %a "$data")" = 700 ] || fail "the data folder is $(stat -c %a "$data"), not 700"
[ "$(stat -c %a "$data/config.yaml")" = 600 ] || fail "config.yaml is not 600"
# The admin token is on disk in the data folder only (data/admin_token), and not in the output.
token=$(cat "$data/data/admin_token")
! grep -rqs --exclude-dir=dev.switchyard.desktop -- "$token" "$HOME" "$work/out.log" || fail "the token leaked"
sleep 2 # the overview's charts draw
[ -z "$SHOTS" ] || import -window root "$SHOTS/window.png"

# 3. Closing the window hides it; the gateway goes on serving.
wmctrl -c Switchyard
wait_for "! xdotool search --onlyvisible --name '^Switchyard\$' >/dev/null" 10 || fail "the window did not close"
kill -0 "$app" || fail "the app exited when its window closed"
curl -fsS "$base/health" > /dev/null || fail "not serving after the window closed"
# The example's public development key is replaced by one of the user's own.
! grep -q 'sk-switchyard-dev-key' "$data/config.yaml" || fail "the desktop serves the public development key"
key=$(sed -n 's/^ *key: *\(sk-[A-Za-z0-9_-]*\).*/\1/p' "$data/config.yaml" | head -n 1)
[ -n "$key" ] || fail "no client key in config.yaml"
curl -fsS -H "Authorization: Bearer $key" "$base/v1/models" > /dev/null || fail "/v1 not serving"

# 4. A second launch shows the first's window and exits.
t0=$(date +%s%N)
"$BIN" || fail "the second launch exited $?"
echo "second launch handed over and exited in $((($(date +%s%N) - t0) / 1000000)) ms"
wait_for "xdotool search --onlyvisible --name '^Switchyard\$' >/dev/null" 10 || fail "the window did not come back"
wait_for "[ \"\$(xdotool getactivewindow getwindowname)\" = Switchyard ]" 5 || fail "the window is not focused"
kill -0 "$app" || fail "the first instance is gone"

# 5. An alert: a model no source can serve (the example's local source: nothing on :11434).
# The first request's failure cools the source; the next finds every candidate failed (503).
for _ in 1 2; do
    curl -s -o /dev/null -H "Authorization: Bearer $key" -H 'content-type: application/json' \
        -d '{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}' "$base/v1/chat/completions"
done
wait_for "grep -q 'every candidate failed' '$work/notify.log'" 15 || fail "no notification for the alert"

# 6. Idle: the app's RSS and its WebKit processes'.
sleep 20
own=$(ps -o rss= -p "$app")
# WebKit's web and network processes: the app's descendants (under bwrap when sandboxed).
web=$(ps -e -o pid=,ppid=,rss= | awk -v root="$app" '
    { parent[$1] = $2; rss[$1] = $3 }
    END { for (p in parent) { q = parent[p]; while (q > 1 && q != root) q = parent[q]; if (q == root) s += rss[p] } print s + 0 }')
echo "idle RSS: app $((own / 1024)) MB, WebKit processes $((web / 1024)) MB, together $(((own + web) / 1024)) MB"

# 7. Every tray action, in the running app, through the tray's functions; Quit last.
"$BIN" --self-test-actions || fail "the second launch exited $?"
wait_for "grep -q '^SELFTEST actions done' '$work/out.log'" 60 || fail "the actions did not finish"
grep '^SELFTEST action' "$work/out.log"
grep -q '^SELFTEST actions done failed=0' "$work/out.log" || fail "a tray action failed"
grep -qx "$data" "$work/opened" || fail "Open data folder did not open $data"
grep -q 'self-test: alerts reach the desktop' "$work/notify.log" || fail "no notification from the self-test"
wait "$app" || fail "the app exited $? after Quit"
! curl -fsS "$base/health" > /dev/null 2>&1 || fail "still serving after Quit"
[ -z "$(ls -A "$XDG_CONFIG_HOME/autostart" 2>/dev/null)" ] || fail "the login item was left on"
echo "desktop: all passed"
