#!/usr/bin/env bash
# Checks the switchyard-desktop .deb without installing WebKitGTK anywhere, as root.
# Owns the desktop package's acceptance test: its fields, paths and modes, the .desktop entry,
# the stripped binary and its debug link, every library it needs resolving on this machine and
# owned by a package in Depends, and, in the clean Debian root test-deb.sh uses (cached), dpkg
# refusing to configure it for exactly the declared missing dependencies, configuring it once
# those are there (as empty stand-ins), and removing it without a trace.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: packaging/test-desktop-deb.sh [DEB]   (as root; default DEB: the newest target/packages/switchyard-desktop_*.deb)

The binary's libraries are checked with ldd on this machine, which needs the desktop app's runtime
(libwebkit2gtk-4.1-0, libgtk-3-0, libayatana-appindicator3-1: docs/gui.md); without it those
checks are skipped. Nothing is installed on this machine.

Environment: the SWITCHYARD_TEST_* variables of packaging/test-deb.sh (the root's cache, mirror, suite, KEEP), and
  SWITCHYARD_TEST_XVFB=1  also start the packaged binary on a virtual display (Xvfb, openbox,
                          dbus-run-session, xdotool, xprop: as desktop/xvfb-test.sh) and check its
                          window's WM_CLASS against the .desktop file's StartupWMClass
EOF
}

case "${1:-}" in -h|--help) usage; exit 0 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
deb=${1:-$(ls -t "$repo"/target/packages/switchyard-desktop_*.deb 2>/dev/null | head -n 1 || true)}
[ -n "$deb" ] && [ -f "$deb" ] || { echo "test-desktop-deb.sh: no .deb given or found (packaging/build.sh with a desktop binary first)" >&2; exit 2; }
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
[ "$(id -u)" = 0 ] || { echo "test-desktop-deb.sh: must run as root (debootstrap, chroot)" >&2; exit 2; }
for tool in debootstrap chroot dpkg-deb desktop-file-validate readelf objcopy ldd python3; do
    command -v "$tool" >/dev/null || { echo "test-desktop-deb.sh: needs $tool (apt-get install debootstrap desktop-file-utils binutils python3)" >&2; exit 2; }
done

. "$here/test-root.sh" # suite, cache, mirror; test_root_fill; pass, fail, check and their tally
skip() { echo "SKIP: $*"; }

work=$(mktemp -d /var/tmp/switchyard-desktop-test.XXXXXX)
root="$work/root"
mkdir "$root"
cleanup() {
    if [ "${SWITCHYARD_TEST_KEEP:-0}" = 1 ]; then
        echo "kept the test files: $work"
    else
        rm -rf --one-file-system "$work"
    fi
}
trap cleanup EXIT

app=dev.switchyard.desktop
pkg=$(basename "$deb")
field() { dpkg-deb -f "$deb" "$1"; }

# --- the package's fields --------------------------------------------------------------------------
echo "== dpkg-deb --info $pkg"
package=$(field Package)
version=$(field Version)
arch=$(field Architecture)
depends=$(field Depends)
echo "   Depends: $depends"
[ "$package" = switchyard-desktop ] && pass "Package: switchyard-desktop" || fail "Package: $package"
[ "$pkg" = "switchyard-desktop_${version#*:}_$arch.deb" ] && pass "file name matches Version $version, Architecture $arch" ||
    fail "file name $pkg does not match Version $version, Architecture $arch"
# The Depends' package names (first of each alternative), one a line.
depends_names=$(tr ',' '\n' <<< "$depends" | sed 's/^ *//; s/[ (|].*//' | sed '/^$/d')
in_depends() { grep -qxF "$1" <<< "$depends_names"; }
for want in libwebkit2gtk-4.1-0 libgtk-3-0 libayatana-appindicator3-1 libc6 libgcc-s1; do
    in_depends "$want" && pass "Depends names $want" || fail "Depends lacks $want"
done
[ "$(wc -l <<< "$depends_names")" = "$(sort -u <<< "$depends_names" | wc -l)" ] && pass "Depends names each package once" ||
    fail "Depends names a package twice"
control_files=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t | sed 's|^\./||; /^$/d' | sort | paste -sd' ' -)
[ "$control_files" = "control md5sums" ] && pass "control area: control, md5sums (no maintainer scripts)" ||
    fail "control area holds: $control_files"

# --- paths, owners and modes ----------------------------------------------------------------------
echo "== dpkg-deb --contents"
contents=$(dpkg-deb --contents "$deb")
entry() { # entry PATH: "MODE OWNER" of PATH in the archive, or "missing"
    awk -v p="./${1#/}" '$6 == p { print $1, $2; found = 1 } END { if (!found) print "missing" }' <<< "$contents"
}
expect_entry() { # expect_entry PATH "MODE OWNER"
    local got
    got=$(entry "$1")
    [ "$got" = "$2" ] && pass "$1 is $2" || fail "$1 is $got, expected $2"
}
expect_entry /usr/bin/switchyard-desktop "-rwxr-xr-x root/root"
expect_entry "/usr/share/applications/$app.desktop" "-rw-r--r-- root/root"
for size in 32x32 128x128 256x256; do
    expect_entry "/usr/share/icons/hicolor/$size/apps/$app.png" "-rw-r--r-- root/root"
done
expect_entry /usr/share/doc/switchyard-desktop/copyright "-rw-r--r-- root/root"
others=$(awk '$2 != "root/root"' <<< "$contents")
[ -z "$others" ] && pass "every entry is root/root" || fail "entries not owned by root: $others"
writable=$(awk 'substr($1, 9, 1) == "w"' <<< "$contents")
[ -z "$writable" ] && pass "no entry is world-writable" || fail "world-writable: $writable"
outside=$(awk '$6 != "./" && $6 !~ /^\.\/usr\//' <<< "$contents")
[ -z "$outside" ] && pass "everything is under /usr" || fail "entries outside /usr: $outside"

# --- the files themselves, extracted here ---------------------------------------------------------
x="$work/x"
dpkg-deb -x "$deb" "$x"
desktop_file="$x/usr/share/applications/$app.desktop"
bin="$x/usr/bin/switchyard-desktop"
echo "== desktop-file-validate $app.desktop"
if desktop-file-validate "$desktop_file" > "$work/dfv.log" 2>&1; then
    pass "desktop-file-validate: no errors$(grep -q . "$work/dfv.log" && echo "; $(grep -c . "$work/dfv.log") hint(s):" || true)"
    sed 's/^[^:]*: /      /' "$work/dfv.log"
else
    fail "desktop-file-validate:"
    sed 's/^/      /' "$work/dfv.log"
fi
key() { sed -n "s/^$1=//p" "$desktop_file" | head -n 1; }
[ "$(key Name)" = Switchyard ] && pass "Name=Switchyard" || fail "Name=$(key Name)"
exec_name=$(key Exec | cut -d' ' -f1)
[ "$exec_name" = switchyard-desktop ] && [ -x "$x/usr/bin/$exec_name" ] && pass "Exec=$exec_name is /usr/bin/$exec_name in the package" ||
    fail "Exec=$(key Exec) is not a binary in the package"
[ "$(key Icon)" = "$app" ] && pass "Icon=$app" || fail "Icon=$(key Icon)"
[ "$(key Categories)" = "Development;Network;" ] && pass "Categories=Development;Network;" || fail "Categories=$(key Categories)"
# GTK names the window's WM_CLASS class after the program: its name with the first letter upper-cased.
wm_class="$(tr '[:lower:]' '[:upper:]' <<< "${exec_name:0:1}")${exec_name:1}"
[ "$(key StartupWMClass)" = "$wm_class" ] && pass "StartupWMClass=$wm_class (GTK's class for $exec_name)" ||
    fail "StartupWMClass=$(key StartupWMClass), GTK names $exec_name's windows $wm_class"
for size in 32x32 128x128 256x256; do
    png="$x/usr/share/icons/hicolor/$size/apps/$app.png"
    dims=$(python3 -c 'import struct, sys; d = open(sys.argv[1], "rb").read(24); print("%dx%d" % struct.unpack(">II", d[16:24]) if d[:8] == b"\x89PNG\r\n\x1a\n" else "not-a-png")' "$png" 2>/dev/null || echo missing)
    [ "$dims" = "$size" ] && pass "hicolor/$size icon is a $dims PNG" || fail "hicolor/$size icon is $dims"
done

echo "== the binary"
sections=$(readelf -S -W "$bin")
if grep -q ' \.debug_info ' <<< "$sections"; then fail "/usr/bin/switchyard-desktop still has .debug_info"; else pass "/usr/bin/switchyard-desktop is stripped (no .debug_info)"; fi
objcopy --dump-section .gnu_debuglink="$work/debuglink" "$bin" /dev/null 2>/dev/null || true
link=$(python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); n = d.index(b"\0"); print(d[:n].decode(), int.from_bytes(d[-4:], "little"))' "$work/debuglink" 2>/dev/null || true)
link_name=${link% *}
[ "$link_name" = switchyard-desktop.debug ] && pass ".gnu_debuglink names switchyard-desktop.debug" || fail ".gnu_debuglink: '${link:-none}'"
debug_file="$(dirname "$deb")/switchyard-desktop.debug"
if [ -f "$debug_file" ]; then
    crc=$(python3 -c 'import sys, zlib; print(zlib.crc32(open(sys.argv[1], "rb").read()))' "$debug_file")
    [ "${link#* }" = "$crc" ] && pass "switchyard-desktop.debug beside the .deb matches the link's CRC" ||
        fail "switchyard-desktop.debug beside the .deb does not match the link's CRC (another build's?)"
    readelf -S -W "$debug_file" 2>/dev/null | grep ' \.debug_info ' > /dev/null && pass "switchyard-desktop.debug holds .debug_info" ||
        fail "switchyard-desktop.debug holds no .debug_info"
else
    skip "no switchyard-desktop.debug beside the .deb"
fi

# Every NEEDED library resolves here, and the package owning it is in Depends; so is the owner of
# each library the binary dlopen()s itself (the tray's, tao's X11 ones; libunity is optional).
owner() { # owner SONAME: the installed package that has it for this architecture, or nothing
    local multiarch
    multiarch=$(dpkg-architecture -a"$arch" -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
    dpkg -S "*/$multiarch/$1" 2>/dev/null | sed -n '1s/[:,].*//p' || true
}
if ldconfig -p | grep 'libwebkit2gtk-4\.1\.so\.0 ' > /dev/null; then
    echo "== ldd (this machine's libraries)"
    ldd "$bin" > "$work/ldd" 2>&1 || true
    if grep -q 'not found' "$work/ldd"; then fail "ldd: $(grep 'not found' "$work/ldd" | paste -sd' ' -)"; else pass "ldd: every library found ($(grep -c '=>' "$work/ldd") in all)"; fi
    for soname in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        p=$(owner "$soname")
        if [ -z "$p" ]; then fail "NEEDED $soname: no package owns it here"
        elif in_depends "$p"; then pass "NEEDED $soname: $p, in Depends"
        else fail "NEEDED $soname: $p, not in Depends"; fi
    done
    for soname in libayatana-appindicator3.so.1 libX11.so.6 libXi.so.6; do
        if ! grep -qaF "$soname" "$bin"; then skip "dlopen $soname: not named in the binary"; continue; fi
        p=$(owner "$soname")
        if [ -z "$p" ]; then fail "dlopen $soname: no package owns it here"
        elif in_depends "$p"; then pass "dlopen $soname: $p, in Depends"
        else fail "dlopen $soname: $p, not in Depends"; fi
    done
    v=$("$bin" --version 2>&1 || true)
    [ "$v" = "switchyard-desktop ${version%-*}" ] && pass "the packaged binary runs here: $v" || fail "the packaged binary's --version: $v"
else
    skip "this machine has no libwebkit2gtk-4.1-0: ldd and the library owners are not checked"
fi

if [ "${SWITCHYARD_TEST_XVFB:-0}" = 1 ]; then
    echo "== the packaged binary's window on Xvfb"
    # As desktop/xvfb-test.sh: its own D-Bus session, home, display and window manager.
    # The answer goes to a file: services the session bus starts (the at-spi registry) print to
    # the session's stdout.
    rm -f "$work/wm-class"
    dbus-run-session -- bash -c '
        bin=$1 work=$2
        export HOME=$work/home XDG_DATA_HOME=$work/home/data XDG_CONFIG_HOME=$work/home/config
        mkdir -p "$HOME"
        export WEBKIT_DISABLE_DMABUF_RENDERER=1 WEBKIT_DISABLE_COMPOSITING_MODE=1 LIBGL_ALWAYS_SOFTWARE=1 NO_AT_BRIDGE=1 GDK_BACKEND=x11
        [ "$(id -u)" != 0 ] || export WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS=1
        export DISPLAY=:$((70 + RANDOM % 9))
        Xvfb "$DISPLAY" -screen 0 1280x800x24 -nolisten tcp > /dev/null 2>&1 & xvfb=$!
        for _ in $(seq 50); do xdotool getmouselocation > /dev/null 2>&1 && break; sleep 0.2; done
        openbox > /dev/null 2>&1 & wm=$!
        "$bin" --first-run=example > "$work/xvfb-app.log" 2>&1 & app=$!
        wid=""
        for _ in $(seq 300); do wid=$(xdotool search --name "^Switchyard\$" 2> /dev/null | head -n 1); [ -n "$wid" ] && break; sleep 0.2; done
        [ -z "$wid" ] || xprop -id "$wid" WM_CLASS | sed -n "s/.*= \"[^\"]*\", \"\([^\"]*\)\"/\1/p" > "$work/wm-class"
        kill "$app" "$wm" "$xvfb" 2> /dev/null; wait "$app" 2> /dev/null
        true' xvfb "$bin" "$work" > /dev/null 2>&1 || true
    got=$(cat "$work/wm-class" 2> /dev/null || true)
    if [ -z "$got" ]; then fail "no window named Switchyard on Xvfb (log: $work/xvfb-app.log)"
    elif [ "$got" = "$(key StartupWMClass)" ]; then pass "the window's WM_CLASS class is $got, as StartupWMClass says"
    else fail "the window's WM_CLASS class is $got, StartupWMClass says $(key StartupWMClass)"; fi
fi

# --- in a clean Debian root -----------------------------------------------------------------------
test_root_fill "$root"
echo "   root ready after $(($(date +%s) - start)) s"
in_root() { chroot "$root" "$@"; }
status() { in_root dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true; }
mode_of() { in_root stat -c '%U:%G %a' "$1" 2>/dev/null || echo missing; }
expect_mode() { # expect_mode PATH "OWNER:GROUP MODE"
    local got
    got=$(mode_of "$1")
    [ "$got" = "$2" ] && pass "installed $1 is $2" || fail "installed $1 is $got, expected $2"
}
cp "$deb" "$root/tmp/$pkg"

# dpkg unpacks it, then refuses to configure it: the packages it names must be exactly the
# Depends this root lacks (a Depends the root has, libc6 and libgcc-s1, is checked and met).
echo "== dpkg -i $pkg (the root has none of the GUI libraries)"
if in_root dpkg -i "/tmp/$pkg" > "$work/install.log" 2>&1; then
    fail "dpkg -i succeeded in a root without WebKitGTK"
else
    pass "dpkg -i refuses to configure it: $(grep -m1 'dependency problems' "$work/install.log" || echo "(no dependency message)")"
fi
[ "$(status switchyard-desktop)" = "install ok unpacked" ] && pass "dpkg says unpacked" || fail "dpkg says '$(status switchyard-desktop)'"
refused=$(sed -n 's/^ switchyard-desktop depends on \([^ ;]*\).*/\1/p' "$work/install.log" | sort -u)
lacking=""
for p in $depends_names; do
    [ "$(status "$p")" = "install ok installed" ] || lacking="$lacking $p"
done
lacking=$(tr ' ' '\n' <<< "$lacking" | sed '/^$/d' | sort -u)
echo "   refused for: $(paste -sd' ' - <<< "$refused")"
if [ -n "$refused" ] && [ "$refused" = "$lacking" ]; then
    pass "dpkg refused for exactly the Depends the root lacks ($(wc -l <<< "$refused") packages)"
else
    fail "dpkg refused for [$(paste -sd' ' - <<< "$refused")], the root lacks [$(paste -sd' ' - <<< "$lacking")] of Depends"
fi
for p in libc6 libgcc-s1; do
    ! grep -qxF "$p" <<< "$refused" && [ "$(status "$p")" = "install ok installed" ] && pass "Depends on $p: met by the root's $p $(in_root dpkg-query -W -f='${Version}' "$p")" ||
        fail "Depends on $p not met by the root"
done
expect_mode /usr/bin/switchyard-desktop "root:root 755"
expect_mode "/usr/share/applications/$app.desktop" "root:root 644"
expect_mode "/usr/share/icons/hicolor/256x256/apps/$app.png" "root:root 644"
expect_mode /usr/share/doc/switchyard-desktop/copyright "root:root 644"
check "dpkg --verify: the files match md5sums" sh -c "[ -z \"\$(chroot '$root' dpkg --verify switchyard-desktop 2>&1)\" ]"

# With each refused package there (an empty stand-in, at this machine's version of it), dpkg
# configures it: nothing beyond Depends stands in the way.
echo "== stand-ins for the refused packages, then dpkg --configure"
mkdir -p "$work/standins" "$root/tmp/standins"
for p in $refused; do
    v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)
    if [ -z "$v" ]; then v=$(tr ',' '\n' <<< "$depends" | sed -n "s/^ *$p (>= \([^)]*\)).*/\1/p" | head -n 1); fi
    d="$work/standins/$p"
    mkdir -p "$d/DEBIAN"
    printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: test-desktop-deb.sh <nobody@switchyard.invalid>\nDescription: empty stand-in for %s\n' \
        "$p" "${v:-1.0}" "$arch" "$p" > "$d/DEBIAN/control"
    dpkg-deb --root-owner-group --build "$d" "$root/tmp/standins/$p.deb" > /dev/null
done
if [ -n "$refused" ] && in_root sh -c 'dpkg -i /tmp/standins/*.deb' > "$work/standins.log" 2>&1; then
    pass "stand-ins installed: $(in_root dpkg-query -W -f='${Package} ${Version}, ' $refused | sed 's/, $//')"
else
    fail "stand-ins not installed"; sed 's/^/      /' "$work/standins.log"
fi
if in_root dpkg --configure switchyard-desktop > "$work/configure.log" 2>&1; then pass "dpkg --configure switchyard-desktop"; else fail "dpkg --configure:"; sed 's/^/      /' "$work/configure.log"; fi
[ "$(status switchyard-desktop)" = "install ok installed" ] && pass "dpkg says installed" || fail "dpkg says '$(status switchyard-desktop)'"

echo "== dpkg -P switchyard-desktop"
if in_root dpkg -P switchyard-desktop > "$work/purge.log" 2>&1; then pass "dpkg -P"; else fail "dpkg -P"; sed 's/^/      /' "$work/purge.log"; fi
for path in /usr/bin/switchyard-desktop "/usr/share/applications/$app.desktop" /usr/share/doc/switchyard-desktop \
    "/usr/share/icons/hicolor/32x32/apps/$app.png" "/usr/share/icons/hicolor/128x128/apps/$app.png" \
    "/usr/share/icons/hicolor/256x256/apps/$app.png" /usr/share/lintian/overrides/switchyard-desktop; do
    check "purge: $path gone" sh -c "[ ! -e '$root$path' ]"
done
check "purge: dpkg no longer knows the package" sh -c "! chroot '$root' dpkg-query -W -f='\${Status}' switchyard-desktop 2>/dev/null | grep -q ok"

echo "== $passes passed, $fails failed in $(($(date +%s) - start)) s"
if [ "$fails" -gt 0 ]; then
    echo "FAIL: $fails check(s) failed"
    exit 1
fi
echo "PASS: all checks"
