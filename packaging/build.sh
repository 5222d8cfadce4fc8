#!/usr/bin/env bash
# Builds every Switchyard package from the release binaries: split debug info, tarball, .deb, OCI
# image for the gateway; a .deb for the desktop app when its binary is there.
# Owns the package layouts; the files they ship live beside it (systemd/, deb/, desktop/, container/).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: packaging/build.sh [--binary PATH] [--desktop PATH] [--out DIR] [--version V] [--image] [--no-lint]

  --binary PATH  release binary to package (default: target/release/switchyard); it is copied, never changed
  --desktop PATH desktop app binary for switchyard-desktop_V-R_ARCH.deb (default: target/release/switchyard-desktop
                 when it exists; without one the desktop .deb is skipped). Needs dpkg-shlibdeps (dpkg-dev).
  --out DIR      where the packages go (default: target/packages)
  --version V    package version (default: Cargo.toml's `version`)
  --image        also build the container image (podman or buildah) and save it as an OCI archive
  --no-lint      skip lintian, systemd-analyze and desktop-file-validate

Environment: DEB_REVISION (default 1), DEB_MAINTAINER, SOURCE_DATE_EPOCH (default: the last commit's time).
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
binary="$repo/target/release/switchyard"
desktop=""
out="$repo/target/packages"
version=""
image=0
lint=1
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) binary=$2; shift 2 ;;
        --desktop) desktop=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --version) version=$2; shift 2 ;;
        --image) image=1; shift ;;
        --no-lint) lint=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

die() { echo "build.sh: $*" >&2; exit 1; }
say() { echo "== $*"; }
size() { du -h --apparent-size "$1" | cut -f1; }

[ -f "$binary" ] || die "no binary at $binary (cargo build --release first, or --binary PATH)"
if [ -n "$desktop" ]; then
    [ -f "$desktop" ] || die "no desktop binary at $desktop"
elif [ -f "$repo/target/release/switchyard-desktop" ]; then
    desktop="$repo/target/release/switchyard-desktop"
fi
if [ -n "$desktop" ]; then
    command -v dpkg-shlibdeps >/dev/null || die "the desktop .deb needs dpkg-shlibdeps for its Depends (apt-get install dpkg-dev)"
fi
if [ -z "$version" ]; then
    version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)
    [ -n "$version" ] || die "no version = \"...\" in $repo/Cargo.toml"
fi
revision=${DEB_REVISION:-1}
maintainer=${DEB_MAINTAINER:-Switchyard maintainers <maintainers@switchyard.invalid>}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

# The binary's architecture, from its ELF header (not the host's).
elf_arch() { # elf_arch BINARY: prints "ARCH DEB_ARCH"
    case "$(readelf -h "$1" | sed -n 's/^ *Machine: *//p')" in
        *X86-64*) echo "x86_64 amd64" ;;
        *AArch64*) echo "aarch64 arm64" ;;
        *) die "$1: unsupported architecture: $(readelf -h "$1" | sed -n 's/^ *Machine: *//p')" ;;
    esac
}
read -r arch deb_arch <<< "$(elf_arch "$binary")"
[ -n "$deb_arch" ] || exit 1
triple="$arch-linux"
name="switchyard-$version-$triple"

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-pkg.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --- (a) debug info split off -------------------------------------------------------------------
strip_binary() { # strip_binary BINARY NAME: $work/NAME stripped, its debug info in $out/NAME.debug
    local src=$1 name=$2
    say "stripping $src ($(size "$src"))"
    objcopy --only-keep-debug --compress-debug-sections=zlib "$src" "$out/$name.debug"
    objcopy --strip-debug --strip-unneeded --remove-section=.comment "$src" "$work/$name"
    (cd "$out" && objcopy --add-gnu-debuglink="$name.debug" "$work/$name")
    chmod 0755 "$work/$name"
    "$work/$name" --version >/dev/null || die "the stripped $name does not run"
    echo "   stripped $name $(size "$work/$name"), $name.debug $(size "$out/$name.debug")"
}
strip_binary "$binary" switchyard
stripped="$work/switchyard"
cp "$stripped" "$out/switchyard"

# Shared libraries and glibc version the binary needs (empty for a static musl build).
glibc_min=$(objdump -T "$stripped" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1 || true)
needs_libgcc=0 needs_libstdcxx=0
if readelf -d "$stripped" | grep -q 'NEEDED.*libgcc_s'; then needs_libgcc=1; fi
# The semantic cache's vector index (usearch) is C++.
if readelf -d "$stripped" | grep -q 'NEEDED.*libstdc++'; then needs_libstdcxx=1; fi

# --- configs ------------------------------------------------------------------------------------
# /etc/switchyard/config.yaml: config.example.yaml with the system paths. Each edit must apply,
# so a change to the example's shape stops the build instead of shipping a half-edited config.
edit() { # edit FILE REGEX REPLACEMENT: a sed substitution that must match exactly one line
    local file=$1 re=$2 rep=$3 n
    n=$(grep -cE "$re" "$file" || true)
    [ "$n" = 1 ] || die "config.example.yaml: expected one line matching /$re/, found $n: update packaging/build.sh"
    sed -E -i "s|$re|$rep|" "$file"
}
sysconf="$work/config.yaml"
cp "$repo/config.example.yaml" "$sysconf"
edit "$sysconf" '^# Switchyard example config:.*$' \
    '# Switchyard system config (package switchyard). Secrets: /etc/switchyard/environment, as ${VAR}.\n# Check it as the service user: sudo -u switchyard switchyard check --config /etc/switchyard/config.yaml'
edit "$sysconf" '^listen: 127\.0\.0\.1:8080$' \
    'listen: ${SWITCHYARD_LISTEN:-127.0.0.1:8080}     # beyond loopback: set SWITCHYARD_KEY (the dev key is refused there)'
edit "$sysconf" '^data_dir: \./data( +)#.*$' \
    'data_dir: /var/lib/switchyard               # state.db, state.journal, runtime.yaml, admin_token (0700)'
edit "$sysconf" '^adapter_dir: \./data/adapters( +)#.*$' \
    'adapter_dir: /var/lib/switchyard/adapters   # NAME.wasm or NAME.lua here overrides the built-in NAME\ncache_dir: /var/lib/switchyard/cache        # compiled adapters (the service user has no home)'
if grep -nE '(^|[^.])\./data' "$sysconf"; then die "a ./data path is left in the system config"; fi

# Both configs must pass `switchyard check` (paths moved into a scratch directory, as check
# creates data_dir and compiles the adapters).
check_config() { # check_config FILE LABEL [VAR=VALUE...]
    local file=$1 label=$2 dir
    shift 2
    dir=$(mktemp -d "$work/check.XXXXXX")
    sed -e "s|/var/lib/switchyard|$dir/data|g" -e "s|: /data|: $dir/data|g" "$file" > "$dir/config.yaml"
    if ! env -i PATH=/usr/bin:/bin HOME="$dir" "$@" "$stripped" check --config "$dir/config.yaml" > "$dir/log" 2>&1; then
        cat "$dir/log" >&2
        die "switchyard check refused the $label config"
    fi
    echo "   $label config: $(grep -i -m1 'config OK' "$dir/log" | cut -c1-60)..."
}
say "checking the configs"
check_config "$sysconf" "system (.deb)"
check_config "$here/container/config.yaml" "container" \
    SWITCHYARD_ADMIN_TOKEN=0123456789abcdef0123456789abcdef SWITCHYARD_KEY=sk-0123456789abcdef0123456789

readme_snippet() {
    cat <<EOF
Switchyard $version ($triple)

  switchyard           the gateway, stripped (debug info: switchyard.debug, published beside this archive)
  config.example.yaml  the example config (loopback, state in ./data)
  switchyard.service   the systemd unit the .deb installs (user switchyard, /etc/switchyard, /var/lib/switchyard)
  deployment.md        installing, directory permissions, upgrading, migrating from llmsproxy

Try it:   ./switchyard --config config.example.yaml     then: curl localhost:8080/health
By hand, as the .deb lays it out (Debian/Ubuntu: prefer the .deb, it does all of this):
  install -m 0755 switchyard /usr/bin/switchyard
  useradd --system --home-dir /var/lib/switchyard --shell /usr/sbin/nologin --user-group switchyard
  install -d -m 0750 -g switchyard /etc/switchyard
  install -m 0640 -g switchyard config.example.yaml /etc/switchyard/config.yaml   # set data_dir: /var/lib/switchyard
  install -d -m 0700 -o switchyard -g switchyard /var/lib/switchyard
  install -m 0644 switchyard.service /etc/systemd/system/ && systemctl daemon-reload && systemctl enable --now switchyard
Needs glibc >= ${glibc_min:-none (static)}; trusts the system's CA bundle (/etc/ssl/certs/ca-certificates.crt), or the Mozilla roots built in when there is none.
License: Apache-2.0.
EOF
}

# --- (b) tarball --------------------------------------------------------------------------------
say "tarball"
tdir="$work/tar/$name"
mkdir -p "$tdir"
install -m 0755 "$stripped" "$tdir/switchyard"
install -m 0644 "$repo/config.example.yaml" "$tdir/config.example.yaml"
install -m 0644 "$here/systemd/switchyard.service" "$tdir/switchyard.service"
install -m 0644 "$repo/docs/deployment.md" "$tdir/deployment.md"
readme_snippet > "$tdir/README"
chmod 0644 "$tdir/README"
for f in LICENSE LICENSE-APACHE LICENSE.md COPYING; do
    if [ -f "$repo/$f" ]; then install -m 0644 "$repo/$f" "$tdir/$f"; fi
done
tar -C "$work/tar" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -cf - "$name" | gzip -n -9 > "$out/$name.tar.gz"
echo "   $out/$name.tar.gz $(size "$out/$name.tar.gz")"

run_lintian() { # run_lintian DEB
    say "lintian $(basename "$1")"
    if command -v lintian >/dev/null; then
        # Findings are printed, not fatal: the report names what remains and why.
        lintian --display-info --pedantic --tag-display-limit 0 "$1" 2>&1 | grep -v 'root privileges' || true
    else
        echo "   lintian not installed (apt-get install lintian): skipped"
    fi
}

# --- (c) .deb -----------------------------------------------------------------------------------
say ".deb"
deb_version="$version-$revision"
root="$work/deb/root"
doc="$root/usr/share/doc/switchyard"
install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/etc/switchyard" "$root/lib/systemd/system" \
    "$doc/examples" "$root/usr/share/lintian/overrides"
install -m 0755 "$stripped" "$root/usr/bin/switchyard"
# The archive holds root:root 0644/0755 (no secret is shipped); postinst gives /etc/switchyard
# 0750 and its files 0640 to group switchyard through dpkg-statoverride, which dpkg then
# applies itself on every upgrade.
install -m 0644 "$sysconf" "$root/etc/switchyard/config.yaml"
install -m 0644 "$here/deb/environment" "$root/etc/switchyard/environment"
install -m 0644 "$here/systemd/switchyard.service" "$root/lib/systemd/system/switchyard.service"
install -m 0644 "$here/deb/copyright" "$doc/copyright"
install -m 0644 "$repo/docs/deployment.md" "$doc/deployment.md"
install -m 0644 "$repo/config.example.yaml" "$doc/examples/config.example.yaml"
changelog() { # changelog PACKAGE DOC_DIR: DOC_DIR/changelog.Debian.gz, one entry for this release
    printf '%s (%s) unstable; urgency=medium\n\n  * Release %s, packaged from the release binary by packaging/build.sh.\n\n -- %s  %s\n' \
        "$1" "$deb_version" "$version" "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")" | gzip -n -9 > "$2/changelog.Debian.gz"
    chmod 0644 "$2/changelog.Debian.gz"
}
changelog switchyard "$doc"
install -m 0644 "$here/deb/lintian-overrides" "$root/usr/share/lintian/overrides/switchyard"
for s in postinst prerm postrm; do install -m 0755 "$here/deb/$s" "$root/DEBIAN/$s"; done
printf '/etc/switchyard/config.yaml\n/etc/switchyard/environment\n' > "$root/DEBIAN/conffiles"

depends="ca-certificates"
if [ -n "$glibc_min" ]; then depends="libc6 (>= $glibc_min), $depends"; fi
if [ "$needs_libgcc" = 1 ]; then depends="${depends/ca-certificates/libgcc-s1, ca-certificates}"; fi
if [ "$needs_libstdcxx" = 1 ]; then depends="${depends/ca-certificates/libstdc++6, ca-certificates}"; fi
installed_size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
{
    echo "Package: switchyard"
    echo "Version: $deb_version"
    echo "Architecture: $deb_arch"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $installed_size"
    echo "Depends: $depends"
    echo "Recommends: adduser"
    echo "Suggests: redis-server, nginx | reverse-proxy"
    echo "Section: net"
    echo "Priority: optional"
    echo "Description: LLM API gateway with sandboxed WebAssembly adapters"
    echo " Switchyard serves OpenAI and Anthropic clients (chat completions, messages,"
    echo " responses, embeddings, images) from many upstream sources, with failover,"
    echo " cooldowns, AUTO chains with token quotas, gateway keys, a WebUI and"
    echo " Prometheus metrics. Each upstream protocol is translated by a sandboxed"
    echo " WebAssembly adapter; legacy Lua 5.1 adapter scripts run unchanged."
    echo " ."
    echo " This package runs it as the systemd service switchyard (user switchyard),"
    echo " configured in /etc/switchyard and keeping its state in /var/lib/switchyard."
    echo " The service is enabled but not started on installation."
} > "$root/DEBIAN/control"
build_deb() { # build_deb ROOT DEB: md5sums, reproducible mtimes, then dpkg-deb
    local root=$1 deb=$2
    (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
    chmod 0644 "$root/DEBIAN/md5sums"
    find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
}
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles"
deb="$out/switchyard_${deb_version}_${deb_arch}.deb"
build_deb "$root" "$deb"
echo "   $deb $(size "$deb") (Depends: $depends)"

if [ "$lint" = 1 ]; then
    # The unit as shipped but for ExecStart, pointed at the stripped binary in the .deb's tree
    # (verify needs the binary to exist; --root= would need a whole systemd tree in there).
    say "systemd-analyze verify"
    if command -v systemd-analyze >/dev/null; then
        mkdir -p "$work/verify"
        sed "s|^ExecStart=/usr/bin/switchyard |ExecStart=$root/usr/bin/switchyard |" \
            "$here/systemd/switchyard.service" > "$work/verify/switchyard.service"
        grep -q "^ExecStart=$root/" "$work/verify/switchyard.service" || die "no ExecStart=/usr/bin/switchyard in the unit"
        if ! systemd-analyze verify --man=no "$work/verify/switchyard.service"; then
            die "systemd-analyze verify found problems in switchyard.service"
        fi
        echo "   switchyard.service: no problems"
    else
        echo "   systemd-analyze not installed: skipped"
    fi
    run_lintian "$deb"
fi

# --- (d) desktop .deb ---------------------------------------------------------------------------
if [ -n "$desktop" ]; then
    say "desktop .deb"
    read -r _ desktop_arch <<< "$(elf_arch "$desktop")"
    [ -n "$desktop_arch" ] || exit 1
    desktop_version=$("$desktop" --version 2>/dev/null | awk '{ print $2 }' || true)
    if [ "$desktop_version" != "$version" ]; then
        echo "   note: $desktop says version ${desktop_version:-?}; packaged as $version"
    fi
    strip_binary "$desktop" switchyard-desktop
    app=dev.switchyard.desktop # the app's identifier (desktop/tauri.conf.json): .desktop file and icon names
    # The root is debian/switchyard-desktop beside a debian/control: the layout dpkg-shlibdeps reads.
    droot="$work/desktop/debian/switchyard-desktop"
    ddoc="$droot/usr/share/doc/switchyard-desktop"
    install -d -m 0755 "$droot/DEBIAN" "$droot/usr/bin" "$droot/usr/share/applications" "$ddoc" \
        "$droot/usr/share/lintian/overrides"
    install -m 0755 "$work/switchyard-desktop" "$droot/usr/bin/switchyard-desktop"
    install -m 0644 "$here/desktop/$app.desktop" "$droot/usr/share/applications/$app.desktop"
    for icon in 32x32:32x32 128x128:128x128 256x256:128x128@2x; do
        install -D -m 0644 "$repo/desktop/icons/${icon#*:}.png" "$droot/usr/share/icons/hicolor/${icon%%:*}/apps/$app.png"
    done
    install -m 0644 "$here/deb/copyright" "$ddoc/copyright"
    changelog switchyard-desktop "$ddoc"
    install -m 0644 "$here/desktop/lintian-overrides" "$droot/usr/share/lintian/overrides/switchyard-desktop"
    # No maintainer scripts: the app keeps its data per user (~/.local/share/dev.switchyard.desktop),
    # and dpkg's file triggers (desktop-file-utils, hicolor-icon-theme) refresh the desktop
    # database and the icon cache.

    # Depends: the linked libraries, as dpkg-shlibdeps reads them (NEEDED, symbols/shlibs files)...
    printf 'Source: switchyard\n\nPackage: switchyard-desktop\nArchitecture: any\n' > "$work/desktop/debian/control"
    desktop_depends=$(cd "$work/desktop" && dpkg-shlibdeps -O -edebian/switchyard-desktop/usr/bin/switchyard-desktop |
        sed -n 's/^shlibs:Depends=//p')
    [ -n "$desktop_depends" ] || die "dpkg-shlibdeps found no dependencies for switchyard-desktop"
    # ...and the libraries it dlopen()s itself (not NEEDED, so invisible to dpkg-shlibdeps), each
    # only when its name is in the binary, with the version from its package's shlibs file:
    #   libayatana-appindicator3.so.1  the tray (libappindicator-sys; it panics without one)
    #   libX11.so.6, libXi.so.6        tao's X11 device events (x11-dl; unwrapped, so required)
    # libunity (tao's taskbar progress) is optional: tao does without it.
    multiarch=$(dpkg-architecture -a"$desktop_arch" -qDEB_HOST_MULTIARCH 2>/dev/null)
    for soname in libayatana-appindicator3.so.1 libX11.so.6 libXi.so.6; do
        grep -qaF "$soname" "$droot/usr/bin/switchyard-desktop" || continue
        pkg=$(dpkg -S "*/$multiarch/$soname" 2>/dev/null | sed -n '1s/[:,].*//p' || true)
        [ -n "$pkg" ] || die "$soname: no installed package has it (the desktop build needs it too: docs/gui.md)"
        lib=${soname%.so.*}
        dep=$(dpkg-query --control-show "$pkg:$desktop_arch" shlibs 2>/dev/null ||
            dpkg-query --control-show "$pkg" shlibs 2>/dev/null || true)
        dep=$(awk -v l="$lib" -v v="${soname##*.so.}" '$1 == l && $2 == v { $1 = ""; $2 = ""; sub(/^ +/, ""); print; exit }' <<< "$dep")
        [ -n "$dep" ] || dep=$pkg
        desktop_depends="$desktop_depends, $dep"
    done
    # One entry per package, sorted.
    desktop_depends=$(tr ',' '\n' <<< "$desktop_depends" | sed 's/^ *//; /^$/d' | sort -u -t' ' -k1,1 | paste -sd, - | sed 's/,/, /g')

    installed_size=$(du -sk --exclude=DEBIAN "$droot" | cut -f1)
    {
        echo "Package: switchyard-desktop"
        echo "Version: $deb_version"
        echo "Architecture: $desktop_arch"
        echo "Maintainer: $maintainer"
        echo "Installed-Size: $installed_size"
        echo "Depends: $desktop_depends"
        echo "Recommends: xdg-utils"
        echo "Section: net"
        echo "Priority: optional"
        echo "Description: LLM API gateway in a desktop app, with its WebUI and a tray icon"
        echo " Switchyard serves OpenAI and Anthropic clients from many upstream sources,"
        echo " with failover, cooldowns, AUTO chains with token quotas, gateway keys and"
        echo " sandboxed WebAssembly adapters."
        echo " ."
        echo " This package is the desktop app: the gateway runs inside it on loopback,"
        echo " its WebUI opens in a window already logged in, and a tray icon keeps it"
        echo " serving when the window closes. Alerts arrive as desktop notifications."
        echo " Each user's config and state live in ~/.local/share/dev.switchyard.desktop."
        echo " For a server, install the package switchyard (a systemd service) instead."
    } > "$droot/DEBIAN/control"
    chmod 0644 "$droot/DEBIAN/control"
    ddeb="$out/switchyard-desktop_${deb_version}_${desktop_arch}.deb"
    build_deb "$droot" "$ddeb"
    echo "   $ddeb $(size "$ddeb") (Depends: $desktop_depends)"

    if [ "$lint" = 1 ]; then
        say "desktop-file-validate"
        if command -v desktop-file-validate >/dev/null; then
            desktop-file-validate "$droot/usr/share/applications/$app.desktop" || die "desktop-file-validate found problems in $app.desktop"
            echo "   $app.desktop: valid (hints, if any, above)"
        else
            echo "   desktop-file-validate not installed (apt-get install desktop-file-utils): skipped"
        fi
        run_lintian "$ddeb"
    fi
else
    say "desktop .deb: skipped (no target/release/switchyard-desktop: cargo build -p switchyard-desktop --release, or --desktop PATH)"
fi

# --- (e) container image ------------------------------------------------------------------------
ctx="$out/image-context"
rm -rf "$ctx"
mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/etc/switchyard" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/data" "$ctx/rootfs/tmp" \
    "$ctx/rootfs/lib" "$ctx/rootfs/lib64"
install -m 0755 "$stripped" "$ctx/rootfs/usr/bin/switchyard"
install -m 0644 "$here/container/config.yaml" "$ctx/rootfs/etc/switchyard/config.yaml"
ca=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca" ] || die "no CA bundle at $ca to put in the image (apt-get install ca-certificates)"
install -m 0644 "$ca" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
# The shared libraries ldd lists (none for a static build), at the paths the loader looks in.
{ ldd "$stripped" 2>/dev/null || true; } | { grep -oE '/[^ ]+' || true; } | sort -u | while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$ctx/rootfs$lib"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nswitchyard:x:65532:65532:switchyard:/data:/sbin/nologin\n' > "$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nswitchyard:x:65532:\n' > "$ctx/rootfs/etc/group"
printf 'hosts: files dns\n' > "$ctx/rootfs/etc/nsswitch.conf"
chmod 0644 "$ctx/rootfs/etc/passwd" "$ctx/rootfs/etc/group" "$ctx/rootfs/etc/nsswitch.conf"
chmod 0700 "$ctx/rootfs/data"
chmod 1777 "$ctx/rootfs/tmp"
cp "$here/container/Containerfile" "$ctx/Containerfile"
echo "   image context: $ctx ($(du -sh "$ctx" | cut -f1))"

if [ "$image" = 1 ]; then
    say "container image"
    tag="localhost/switchyard:$version"
    archive="$out/$name.image.tar"
    rm -f "$archive"
    if command -v podman >/dev/null; then
        # No registry is needed: FROM scratch, nothing pulled, no RUN step.
        # Docker's image format: the OCI one drops HEALTHCHECK. The archive loads with
        # `docker load` and `podman load` alike.
        podman build --pull=never --layers=false --format docker --build-arg VERSION="$version" -t "$tag" -f "$ctx/Containerfile" "$ctx"
        podman save --format docker-archive -o "$archive" "$tag"
    elif command -v buildah >/dev/null; then
        buildah build --pull=never --format docker --build-arg VERSION="$version" -t "$tag" -f "$ctx/Containerfile" "$ctx"
        buildah push "$tag" "docker-archive:$archive:$tag"
    else
        die "--image needs podman or buildah (apt-get install podman)"
    fi
    echo "   $tag; $archive $(size "$archive")"
fi

say "done: $out"
ls -l "$out" | sed 's/^/   /'
