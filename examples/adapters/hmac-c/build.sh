#!/usr/bin/env bash
# Builds hmac-openai.wasm, a WebAssembly component for Switchyard, from C.
#
#   ./build.sh          bindings, native tests (HMAC vectors, JSON/body/error logic, memory
#                       ownership under ASan/LSan), then the component
#   ./build.sh test     the same, then `switchyard adapter test hmac-openai.wasm --cases cases`
#   DEBUG=1 ./build.sh  keep symbol names and debug info (bigger; readable traps)
#
# Works from any directory. Needs: clang with the wasm32 target, wasi-libc, wasm-component-ld
# (shipped with Rust's toolchain and with wasi-sdk), wit-bindgen 0.63.0 (installed with cargo
# into the repository's target/tools if missing). Overrides: CC, WASI_SYSROOT, WASI_SDK_PATH,
# WASM_COMPONENT_LD, WIT_BINDGEN, SWITCHYARD.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
WIT="$REPO/wit"
# The bounded JSON scanner is the C starter template's (one copy, which `adapter new` hands out).
SHARED="$REPO/src/authoring/templates/c"
OUT="$HERE/hmac-openai.wasm"
WIT_BINDGEN_VERSION=0.63.0
cd "$HERE"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

# ---- wit-bindgen ----------------------------------------------------------------------------
find_wit_bindgen() {
    local c
    for c in "${WIT_BINDGEN:-}" "$(command -v wit-bindgen || true)" "$REPO/target/tools/bin/wit-bindgen"; do
        if [ -n "$c" ] && [ -x "$c" ] && "$c" --version 2>/dev/null | grep -q " $WIT_BINDGEN_VERSION\$"; then
            echo "$c"
            return
        fi
    done
}
WB="$(find_wit_bindgen)"
if [ -z "$WB" ]; then
    say "installing wit-bindgen $WIT_BINDGEN_VERSION into $REPO/target/tools (once; a few minutes)"
    cargo install wit-bindgen-cli --version "$WIT_BINDGEN_VERSION" --locked --root "$REPO/target/tools" \
        --no-default-features --features c
    WB="$REPO/target/tools/bin/wit-bindgen"
fi

# ---- C toolchain ----------------------------------------------------------------------------
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
# The triple the sysroot is laid out for: wasm32-wasip1 (newer), wasm32-wasi (Debian's).
if [ -d "$WASI_SYSROOT/lib/wasm32-wasip1" ]; then TRIPLE=wasm32-wasip1; else TRIPLE=wasm32-wasi; fi

if [ -z "${WASM_COMPONENT_LD:-}" ]; then
    for c in "$(command -v wasm-component-ld || true)" \
        "${WASI_SDK_PATH:+$WASI_SDK_PATH/bin/wasm-component-ld}" \
        "$(rustc --print sysroot 2>/dev/null || true)/lib/rustlib/$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')/bin/wasm-component-ld"; do
        if [ -n "$c" ] && [ -x "$c" ]; then WASM_COMPONENT_LD="$c"; break; fi
    done
fi
[ -n "${WASM_COMPONENT_LD:-}" ] || die "no wasm-component-ld (install Rust, or: cargo install wasm-component-ld)"

# ---- bindings -------------------------------------------------------------------------------
say "bindings: $WB c $WIT"
rm -rf gen
"$WB" c "$WIT" --world adapter-world --out-dir gen >/dev/null 2>&1 || "$WB" c "$WIT" --world adapter-world --out-dir gen

# ---- native tests ---------------------------------------------------------------------------
# The HMAC against RFC 4231, the JSON/body/error logic, and the memory ownership (the host's side
# of the ABI played natively under AddressSanitizer/LeakSanitizer: leaks and bad frees fail it).
if command -v cc >/dev/null; then
    say "native tests"
    T="$(mktemp -d)"
    trap 'rm -rf "$T"' EXIT
    cc -std=c11 -O2 -Wall -Wextra -o "$T/test_hmac" test_hmac.c sha256.c
    "$T/test_hmac" | tail -n 1
    SAN=()
    if echo 'int main(void){return 0;}' | cc -x c -fsanitize=address,undefined -o "$T/san" - 2>/dev/null; then
        SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all)
    fi
    cc -std=c11 -O1 -g "${SAN[@]}" -Wall -Wextra -I"$SHARED" -o "$T/test_openai" test_openai.c openai.c "$SHARED/json.c"
    "$T/test_openai" | tail -n 1
    if [ ${#SAN[@]} -gt 0 ]; then
        cc -O1 -g "${SAN[@]}" -w -Igen -I. -I"$SHARED" -c gen/adapter_world.c -o "$T/gen.o"
        cc -std=c11 -O1 -g "${SAN[@]}" -Wall -Wextra -Wno-unused-parameter -Igen -I. -I"$SHARED" \
            -Dexports_switchyard_adapter_adapter_session_new=test_session_new \
            -o "$T/test_abi" test_abi.c adapter.c openai.c "$SHARED/json.c" sha256.c "$T/gen.o"
        "$T/test_abi" | tail -n 1
    else
        say "no sanitizers in the native cc: skipping the ownership test"
    fi
else
    say "no native cc: skipping the native tests"
fi

# ---- compile and link -----------------------------------------------------------------------
CFLAGS=(--target="$TRIPLE" --sysroot="$WASI_SYSROOT" -mexec-model=reactor -std=c11 -Wall -Wextra
    -Wno-unused-parameter -Wno-deprecated -Igen -I. -I"$SHARED")
# Only wasi-libc headers: never the host's /usr/include, even when the sysroot is /usr.
if [ -d "$WASI_SYSROOT/include/$TRIPLE" ]; then
    CFLAGS+=(-nostdinc -isystem "$("$CC" -print-resource-dir)/include" -isystem "$WASI_SYSROOT/include/$TRIPLE")
fi
if [ -n "${DEBUG:-}" ]; then CFLAGS+=(-O1 -g); else CFLAGS+=(-O2); fi
# -nodefaultlibs -lc: link wasi-libc but not compiler-rt's builtins, which Debian does not ship
# for wasm32 (nothing here needs them). --strip-all drops names and debug info.
LDFLAGS=(-fuse-ld="$WASM_COMPONENT_LD" -nodefaultlibs -lc)
[ -n "${DEBUG:-}" ] || LDFLAGS+=(-Wl,--strip-all)

say "compile + link: $CC ${CFLAGS[*]} ... ${LDFLAGS[*]}"
START=$(date +%s%N)
"$CC" "${CFLAGS[@]}" adapter.c openai.c "$SHARED/json.c" sha256.c gen/adapter_world.c gen/adapter_world_component_type.o \
    "${LDFLAGS[@]}" -o "$OUT"
END=$(date +%s%N)

# A component that imports WASI would carry the preview1 adapter and ask the host for WASI,
# which Switchyard does not give. Nothing here should pull it in.
if grep -aq 'wasi_snapshot_preview1\|wasi:cli/' "$OUT"; then
    die "$OUT imports WASI: some libc function used needs it (stdio, time, getenv...); remove it"
fi
say "built $OUT: $(stat -c %s "$OUT" 2>/dev/null || wc -c <"$OUT") bytes, compiled and linked in $(((END - START) / 1000000)) ms"

# ---- replay the cases -----------------------------------------------------------------------
if [ "${1:-}" = test ]; then
    SY="${SWITCHYARD:-$(command -v switchyard || echo "$REPO/target/debug/switchyard")}"
    [ -x "$SY" ] || die "no switchyard binary (set SWITCHYARD=path/to/switchyard)"
    "$SY" adapter test "$OUT" --cases "$HERE/cases"
fi
