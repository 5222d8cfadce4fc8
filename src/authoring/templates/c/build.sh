#!/usr/bin/env bash
# Builds {{name}}.wasm, the component to upload or put in the gateway's adapter_dir.
#
#   ./build.sh          bindings from ./wit into gen/, then the component
#   DEBUG=1 ./build.sh  keep names and debug info (bigger; traps name the function)
#
# Needs clang with the wasm32 target and wasi-libc (Debian/Ubuntu: apt install clang lld
# wasi-libc; or a wasi-sdk: WASI_SDK_PATH=/opt/wasi-sdk), wasm-component-ld (comes with Rust,
# and with wasi-sdk), and wit-bindgen 0.63.0 (installed with cargo into ./.tools if missing).
# Overrides: CC, WASI_SYSROOT, WASI_SDK_PATH, WASM_COMPONENT_LD, WIT_BINDGEN.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
OUT={{name}}.wasm
WIT_BINDGEN_VERSION=0.63.0
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

# wit-bindgen: on PATH, or in ./.tools, or installed there.
WB=""
for c in "${WIT_BINDGEN:-}" "$(command -v wit-bindgen || true)" ./.tools/bin/wit-bindgen; do
    if [ -n "$c" ] && [ -x "$c" ] && "$c" --version 2>/dev/null | grep -q " $WIT_BINDGEN_VERSION\$"; then WB="$c"; break; fi
done
if [ -z "$WB" ]; then
    echo "installing wit-bindgen $WIT_BINDGEN_VERSION into ./.tools (once; a few minutes)" >&2
    cargo install wit-bindgen-cli --version "$WIT_BINDGEN_VERSION" --locked --root ./.tools \
        --no-default-features --features c
    WB=./.tools/bin/wit-bindgen
fi

# clang and wasi-libc.
if [ -n "${WASI_SDK_PATH:-}" ]; then
    CC="${CC:-$WASI_SDK_PATH/bin/clang}"
    WASI_SYSROOT="${WASI_SYSROOT:-$WASI_SDK_PATH/share/wasi-sysroot}"
fi
if [ -z "${CC:-}" ]; then
    for c in clang-22 clang-21 clang-20 clang-19 clang-18 clang; do
        if command -v "$c" >/dev/null; then CC="$c"; break; fi
    done
fi
[ -n "${CC:-}" ] || die "no clang found (set CC, or WASI_SDK_PATH to a wasi-sdk)"
if [ -z "${WASI_SYSROOT:-}" ]; then
    for s in /usr /opt/wasi-sdk/share/wasi-sysroot /usr/share/wasi-sysroot; do
        if ls "$s"/lib/wasm32-wasi*/libc.a >/dev/null 2>&1; then WASI_SYSROOT="$s"; break; fi
    done
fi
[ -n "${WASI_SYSROOT:-}" ] || die "no wasi-libc found (apt install wasi-libc, or set WASI_SYSROOT / WASI_SDK_PATH)"
if [ -d "$WASI_SYSROOT/lib/wasm32-wasip1" ]; then TRIPLE=wasm32-wasip1; else TRIPLE=wasm32-wasi; fi

# The linker that turns the core module into a component.
if [ -z "${WASM_COMPONENT_LD:-}" ]; then
    for c in "$(command -v wasm-component-ld || true)" \
        "${WASI_SDK_PATH:+$WASI_SDK_PATH/bin/wasm-component-ld}" \
        "$(rustc --print sysroot 2>/dev/null || true)/lib/rustlib/$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')/bin/wasm-component-ld"; do
        if [ -n "$c" ] && [ -x "$c" ]; then WASM_COMPONENT_LD="$c"; break; fi
    done
fi
[ -n "${WASM_COMPONENT_LD:-}" ] || die "no wasm-component-ld (install Rust, or: cargo install wasm-component-ld)"

rm -rf gen
"$WB" c ./wit --world adapter-world --out-dir gen >/dev/null 2>&1 || "$WB" c ./wit --world adapter-world --out-dir gen

CFLAGS=(--target="$TRIPLE" --sysroot="$WASI_SYSROOT" -mexec-model=reactor -std=c11 -Wall -Wextra
    -Wno-unused-parameter -Wno-deprecated -Igen -I.)
if [ -d "$WASI_SYSROOT/include/$TRIPLE" ]; then   # wasi-libc headers only, never the host's
    CFLAGS+=(-nostdinc -isystem "$("$CC" -print-resource-dir)/include" -isystem "$WASI_SYSROOT/include/$TRIPLE")
fi
if [ -n "${DEBUG:-}" ]; then CFLAGS+=(-O1 -g); else CFLAGS+=(-O2); fi
LDFLAGS=(-fuse-ld="$WASM_COMPONENT_LD" -nodefaultlibs -lc)
[ -n "${DEBUG:-}" ] || LDFLAGS+=(-Wl,--strip-all)

"$CC" "${CFLAGS[@]}" adapter.c json.c gen/adapter_world.c gen/adapter_world_component_type.o "${LDFLAGS[@]}" -o "$OUT"

# The gateway gives no WASI: a libc call that needs it (printf, fopen, time...) must go.
if grep -aq 'wasi_snapshot_preview1\|wasi:cli/' "$OUT"; then
    die "$OUT imports WASI (stdio, clocks, files...): remove those libc calls; log with switchyard_adapter_host_log"
fi
echo "built $OUT ($(du -k "$OUT" | cut -f1) KiB)"
