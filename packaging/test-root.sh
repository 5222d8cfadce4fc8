# Sourced by packaging/test-deb.sh and packaging/test-desktop-deb.sh: the clean Debian root
# (debootstrap minbase) they install into, made once per (suite, mirror, packages) and kept as a
# tarball, so both share one cache.
# Reads SWITCHYARD_TEST_SUITE (default bookworm), SWITCHYARD_TEST_MIRROR (default: the machine's
# apt source for the suite), SWITCHYARD_TEST_ROOT_CACHE (default /var/cache/switchyard-test-root).
# Sets suite, cache and mirror (exits 2 when no mirror is found); defines test_root_fill DIR,
# and the tally both print: pass, fail, check DESCRIPTION COMMAND... (passes, fails, start).

start=$(date +%s)
fails=0
passes=0
pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { # check DESCRIPTION COMMAND...: PASS when the command succeeds
    local what=$1
    shift
    if "$@" >/dev/null 2>&1; then pass "$what"; else fail "$what"; fi
}

test_root_me=$(basename "$0")
suite=${SWITCHYARD_TEST_SUITE:-bookworm}
cache=${SWITCHYARD_TEST_ROOT_CACHE:-/var/cache/switchyard-test-root}

# The mirror: the machine's own apt source for the suite (one-line or deb822 format).
mirror=${SWITCHYARD_TEST_MIRROR:-}
if [ -z "$mirror" ]; then
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk -v s="$suite" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($(i + 1) == s) { print $i; exit } break } }' || true)
fi
if [ -z "$mirror" ]; then
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        mirror=$(awk -v s="$suite" '
            /^[ \t]*$/ { if (u != "" && found) { print u; exit } u = ""; found = 0; next }
            tolower($1) == "uris:" { u = $2 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) found = 1 }
            END { if (u != "" && found) print u }' "$f" | head -n 1)
        [ -n "$mirror" ] && break
    done
fi
[ -n "$mirror" ] || { echo "$test_root_me: no $suite mirror in /etc/apt/sources*: set SWITCHYARD_TEST_MIRROR" >&2; exit 2; }

test_root_fill() { # test_root_fill DIR: the clean root in DIR (an empty directory), from the cache or debootstrap
    local root=$1 include=ca-certificates key tarball
    key=$(printf '%s %s %s' "$suite" "$mirror" "$include" | sha256sum | cut -c1-12)
    tarball="$cache/$suite-minbase-$key.tar"
    if [ -f "$tarball" ]; then
        echo "== root from the cache $tarball"
        tar -C "$root" --numeric-owner -xpf "$tarball"
    else
        echo "== debootstrap --variant=minbase --include=$include $suite (mirror $mirror); cached in $cache"
        mkdir -p "$cache"
        if ! debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" > "$root.debootstrap.log" 2>&1; then
            tail -n 20 "$root.debootstrap.log" >&2
            rm -f "$root.debootstrap.log"
            echo "$test_root_me: debootstrap failed" >&2
            exit 1
        fi
        rm -f "$root.debootstrap.log"
        chroot "$root" apt-get clean
        tar -C "$root" --numeric-owner -cpf "$tarball.part" . && mv "$tarball.part" "$tarball"
    fi
    chmod 0755 "$root" # mktemp's 0700 (kept in the tarball's ".") would keep a system user out of /
}
