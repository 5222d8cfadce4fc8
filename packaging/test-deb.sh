#!/usr/bin/env bash
# Installs the switchyard .deb into a clean Debian root (debootstrap minbase) and checks it, as root.
# Owns the package's acceptance test: user, owners and modes, unit enabled, /health as switchyard, remove, purge.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: packaging/test-deb.sh [DEB]      (as root; default DEB: the newest target/packages/switchyard_*.deb)

Environment:
  SWITCHYARD_TEST_ROOT_CACHE  directory keeping the debootstrapped root as a tarball, so later runs
                              skip debootstrap (default: /var/cache/switchyard-test-root)
  SWITCHYARD_TEST_MIRROR      Debian mirror (default: the first bookworm mirror in /etc/apt/sources*)
  SWITCHYARD_TEST_SUITE       default: bookworm
  SWITCHYARD_TEST_PORT        port for the gateway (default: a free one); the packaged config is not
                              edited: its listen is ${SWITCHYARD_LISTEN:-127.0.0.1:8080}
  SWITCHYARD_TEST_KEEP=1      keep the test root (its path is printed)
EOF
}

case "${1:-}" in -h|--help) usage; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
deb=${1:-$(ls -t "$repo"/target/packages/switchyard_*.deb 2>/dev/null | head -n 1 || true)}
[ -n "$deb" ] && [ -f "$deb" ] || { echo "test-deb.sh: no .deb given or found (packaging/build.sh first)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "test-deb.sh: must run as root (debootstrap, chroot)" >&2; exit 2; }
for tool in debootstrap chroot curl dpkg-deb; do
    command -v "$tool" >/dev/null || { echo "test-deb.sh: needs $tool (apt-get install debootstrap curl)" >&2; exit 2; }
done

. "$here/test-root.sh" # suite, cache, mirror; test_root_fill; pass, fail, check and their tally

root=$(mktemp -d /var/tmp/switchyard-test-root.XXXXXX)
gateway_pid=""
cleanup() {
    if [ -n "$gateway_pid" ] && kill -0 "$gateway_pid" 2>/dev/null; then
        kill -TERM "$gateway_pid" 2>/dev/null || true
        sleep 1
        kill -KILL "$gateway_pid" 2>/dev/null || true
    fi
    if mountpoint -q "$root/proc"; then umount "$root/proc" || umount -l "$root/proc" || true; fi
    if [ "${SWITCHYARD_TEST_KEEP:-0}" = 1 ]; then
        echo "kept the test root: $root"
    else
        rm -rf --one-file-system "$root"
    fi
}
trap cleanup EXIT

test_root_fill "$root"
echo "   root ready after $(($(date +%s) - start)) s"
in_root() { chroot "$root" "$@"; }
mode_of() { in_root stat -c '%U:%G %a' "$1" 2>/dev/null || echo missing; }
expect_mode() { # expect_mode PATH "OWNER:GROUP MODE"
    local got
    got=$(mode_of "$1")
    if [ "$got" = "$2" ]; then pass "$1 is $2"; else fail "$1 is $got, expected $2"; fi
}
absent() { [ ! -e "$root$1" ] && [ ! -L "$root$1" ]; }
present() { [ -e "$root$1" ]; }

# The gateway does not need /proc (checked: it serves without); mounted as systemd would have it.
mount -t proc proc "$root/proc"

# --- install ------------------------------------------------------------------------------------
pkg=$(basename "$deb")
version=$(dpkg-deb -f "$deb" Version)
upstream_version=${version%-*}
cp "$deb" "$root/tmp/$pkg"
echo "== dpkg -i $pkg"
if in_root dpkg -i "/tmp/$pkg"; then pass "dpkg -i $pkg"; else fail "dpkg -i $pkg"; fi
check "dpkg says installed" sh -c "chroot '$root' dpkg-query -W -f='\${Status}' switchyard | grep -qx 'install ok installed'"

user_line=$(in_root getent passwd switchyard || true)
if [ -n "$user_line" ]; then pass "system user switchyard: $user_line"; else fail "no user switchyard"; fi
uid=$(echo "$user_line" | cut -d: -f3)
if [ -n "$uid" ] && [ "$uid" -lt 1000 ]; then pass "switchyard is a system uid ($uid)"; else fail "switchyard uid ${uid:-none} is not a system uid"; fi
check "group switchyard exists" in_root getent group switchyard
[ "$(echo "$user_line" | cut -d: -f6)" = /var/lib/switchyard ] && pass "home is /var/lib/switchyard" || fail "home is not /var/lib/switchyard"

expect_mode /usr/bin/switchyard "root:root 755"
expect_mode /etc/switchyard "root:switchyard 750"
expect_mode /etc/switchyard/config.yaml "root:switchyard 640"
expect_mode /etc/switchyard/environment "root:switchyard 640"
expect_mode /var/lib/switchyard "switchyard:switchyard 700"
expect_mode /lib/systemd/system/switchyard.service "root:root 644"
conffiles=$(in_root dpkg-query -W -f='${Conffiles}' switchyard || true)
for f in /etc/switchyard/config.yaml /etc/switchyard/environment; do
    if echo "$conffiles" | grep -q " $f "; then pass "$f is a conffile"; else fail "$f is not a conffile"; fi
done
wants=/etc/systemd/system/multi-user.target.wants/switchyard.service
if [ -L "$root$wants" ] && [ "$(readlink "$root$wants")" = /lib/systemd/system/switchyard.service ]; then
    pass "unit enabled: $wants -> $(readlink "$root$wants")"
else
    fail "unit not enabled ($wants missing or wrong)"
fi
grep -q '^LimitNOFILE=65536$' "$root/lib/systemd/system/switchyard.service" && pass "unit sets LimitNOFILE=65536" || fail "unit lacks LimitNOFILE=65536"
if grep -q '^MemoryDenyWriteExecute' "$root/lib/systemd/system/switchyard.service"; then fail "unit sets MemoryDenyWriteExecute (wasmtime JITs)"; else pass "unit leaves MemoryDenyWriteExecute unset"; fi

# --- run as the service user --------------------------------------------------------------------
as_switchyard() { chroot --userspec=switchyard:switchyard "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
echo "== switchyard check, as user switchyard with the service's environment file (as docs/deployment.md says)"
if as_switchyard sh -c 'set -a; . /etc/switchyard/environment; exec switchyard check --config /etc/switchyard/config.yaml' \
    > "$root/tmp/check.log" 2>&1; then
    pass "switchyard check --config /etc/switchyard/config.yaml (as switchyard): $(grep -i 'config OK' "$root/tmp/check.log" | cut -c1-40)..."
else
    fail "switchyard check as switchyard:"
    sed 's/^/      /' "$root/tmp/check.log"
fi

port=${SWITCHYARD_TEST_PORT:-}
if [ -z "$port" ]; then
    for candidate in $(shuf -i 20000-39999 -n 20); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then port=$candidate; break; fi
    done
fi
echo "== serving as user switchyard on 127.0.0.1:$port (SWITCHYARD_LISTEN; the packaged config says 127.0.0.1:8080)"
# A plain command, not a function: $! is then the gateway itself (chroot and env exec it).
chroot --userspec=switchyard:switchyard "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    SWITCHYARD_LISTEN="127.0.0.1:$port" /usr/bin/switchyard serve --config /etc/switchyard/config.yaml \
    > "$root/tmp/serve.log" 2>&1 &
gateway_pid=$!
health=""
for _ in $(seq 1 60); do
    health=$(curl -s -m 2 "http://127.0.0.1:$port/health" || true)
    [ -n "$health" ] && break
    kill -0 "$gateway_pid" 2>/dev/null || break
    sleep 0.5
done
if echo "$health" | grep -q "\"status\":\"ok\"" && echo "$health" | grep -q "\"version\":\"$upstream_version\""; then
    pass "GET /health as switchyard: $health"
else
    fail "GET /health answered '${health}'"
    sed 's/^/      /' "$root/tmp/serve.log"
fi
proc_uid=$(awk '/^Uid:/ { print $2 }' "/proc/$gateway_pid/status" 2>/dev/null || echo none)
proc_exe=$(readlink "/proc/$gateway_pid/exe" 2>/dev/null || echo none)
if [ "$proc_uid" = "$uid" ] && [ "$proc_exe" = "$root/usr/bin/switchyard" ]; then
    pass "the gateway process ($proc_exe) runs as uid $uid (switchyard)"
else
    fail "the gateway process ($proc_exe) runs as uid $proc_uid, not $uid"
fi
models=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sk-switchyard-dev-key' "http://127.0.0.1:$port/v1/models" || true)
[ "$models" = 200 ] && pass "GET /v1/models with the dev key on loopback: 200" || fail "GET /v1/models with the dev key: $models"
ui=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/ui/" || true)
[ "$ui" = 200 ] && pass "GET /ui/: 200" || fail "GET /ui/: $ui"
expect_mode /var/lib/switchyard/admin_token "switchyard:switchyard 600"
expect_mode /var/lib/switchyard/state.db "switchyard:switchyard 600"
expect_mode /var/lib/switchyard/adapters "switchyard:switchyard 700"
check "compiled adapters cached in /var/lib/switchyard/cache" sh -c "ls '$root/var/lib/switchyard/cache' | grep -q ."
kill -TERM "$gateway_pid" 2>/dev/null || true
stopped=""
for _ in $(seq 1 40); do
    if ! kill -0 "$gateway_pid" 2>/dev/null; then stopped=1; break; fi
    sleep 0.5
done
if [ -n "$stopped" ]; then
    status=0
    wait "$gateway_pid" || status=$?
    [ "$status" = 0 ] && pass "SIGTERM: stopped cleanly (exit 0)" || fail "SIGTERM: exit $status"
else
    fail "SIGTERM: still running after 20 s"
fi
gateway_pid=""

# --- reinstall: the edited conffile and the data stay ---------------------------------------------
echo "== dpkg -i again over an edited config"
echo "# edited by test-deb.sh" >> "$root/etc/switchyard/config.yaml"
if in_root dpkg -i --force-confold "/tmp/$pkg" > "$root/tmp/reinstall.log" 2>&1; then pass "reinstall"; else fail "reinstall"; sed 's/^/      /' "$root/tmp/reinstall.log"; fi
check "the edited config.yaml is kept" grep -q '^# edited by test-deb.sh$' "$root/etc/switchyard/config.yaml"
expect_mode /etc/switchyard/config.yaml "root:switchyard 640"
check "state.db kept" present /var/lib/switchyard/state.db

# --- remove, then purge ---------------------------------------------------------------------------
echo "== dpkg -r switchyard"
if in_root dpkg -r switchyard; then pass "dpkg -r"; else fail "dpkg -r"; fi
check "remove: /usr/bin/switchyard gone" absent /usr/bin/switchyard
check "remove: the unit file gone" absent /lib/systemd/system/switchyard.service
check "remove: /etc/switchyard/config.yaml kept (conffile)" present /etc/switchyard/config.yaml
check "remove: /var/lib/switchyard/state.db kept" present /var/lib/switchyard/state.db
check "remove: the unit stays enabled but masked (deb-systemd-helper)" sh -c "[ -L '$root$wants' ] && [ \"\$(readlink '$root/etc/systemd/system/switchyard.service')\" = /dev/null ]"
check "remove: dpkg says config-files" sh -c "chroot '$root' dpkg-query -W -f='\${Status}' switchyard | grep -qx 'deinstall ok config-files'"
echo "== dpkg -P switchyard"
if in_root dpkg -P switchyard; then pass "dpkg -P"; else fail "dpkg -P"; fi
check "purge: /etc/switchyard gone" absent /etc/switchyard
check "purge: /var/lib/switchyard gone" absent /var/lib/switchyard
check "purge: the enablement symlink gone" absent "$wants"
check "purge: no mask left (/etc/systemd/system/switchyard.service)" absent /etc/systemd/system/switchyard.service
check "purge: no dpkg-statoverride left" sh -c "! chroot '$root' dpkg-statoverride --list | grep -q switchyard"
check "purge: dpkg no longer knows the package" sh -c "! chroot '$root' dpkg-query -W -f='\${Status}' switchyard 2>/dev/null | grep -q ok"
check "purge: the system user is kept (documented)" in_root getent passwd switchyard

# --- without adduser: postinst falls back to groupadd/useradd ---------------------------------------
echo "== dpkg -i without adduser (useradd fallback), then purge"
in_root userdel switchyard >/dev/null 2>&1 || true
in_root groupdel switchyard >/dev/null 2>&1 || true
hidden=""
for tool in /usr/sbin/adduser /usr/sbin/addgroup; do
    if [ -e "$root$tool" ]; then mv "$root$tool" "$root$tool.hidden"; hidden="$hidden $tool"; fi
done
if in_root dpkg -i "/tmp/$pkg" > "$root/tmp/install2.log" 2>&1; then pass "dpkg -i without adduser"; else fail "dpkg -i without adduser"; sed 's/^/      /' "$root/tmp/install2.log"; fi
user_line=$(in_root getent passwd switchyard || true)
if [ -n "$user_line" ] && [ "$(echo "$user_line" | cut -d: -f3)" -lt 1000 ]; then pass "useradd made the system user: $user_line"; else fail "no system user made without adduser"; fi
expect_mode /var/lib/switchyard "switchyard:switchyard 700"
expect_mode /etc/switchyard/config.yaml "root:switchyard 640"
if in_root dpkg -P switchyard > "$root/tmp/purge2.log" 2>&1; then pass "dpkg -P"; else fail "dpkg -P"; fi
for tool in $hidden; do mv "$root$tool.hidden" "$root$tool"; done

echo "== $passes passed, $fails failed in $(($(date +%s) - start)) s"
if [ "$fails" -gt 0 ]; then
    echo "FAIL: $fails check(s) failed"
    exit 1
fi
echo "PASS: all checks"
