#!/usr/bin/env bash
# Builds the Lua-compat component from source into dist/lua-compat.wasm and records the hash of
# its sources in dist/SOURCES.sha256. Needs Debian's clang-22, llvm-22 and wasi-libc.
#   adapters-lua-compat/build.sh           build and update dist/
#   adapters-lua-compat/build.sh --check   build, and fail if dist/ is not current
set -euo pipefail
cd "$(dirname "$0")"

for tool in clang-22 llvm-ar-22; do
    command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install clang-22 llvm-22 lld-22 wasi-libc" >&2; exit 1; }
done
[ -d /usr/include/wasm32-wasi ] || { echo "missing wasi-libc headers: apt-get install wasi-libc" >&2; exit 1; }

# Build from a copy at a fixed path: paths reach the output (panic locations, cargo's metadata
# hashes for path dependencies), and a fixed one makes the component byte for byte the same
# wherever the checkout is.
work="${LUA_COMPAT_BUILD_DIR:-/tmp/switchyard-lua-compat}"
mkdir -p "$work/adapters-lua-compat" "$work/plugins"
rm -rf "$work/adapters-lua-compat/src" "$work/adapters-lua-compat/shim" "$work/adapters-lua-compat/scripts" "$work/plugins" "$work/wit"
cp -r Cargo.toml Cargo.lock build.rs src shim scripts "$work/adapters-lua-compat/"
# adapter-kit inherits from its workspace: copy that workspace's sources (not its target/).
mkdir -p "$work/plugins"
tar -C ../plugins --exclude=./target -cf - . | tar -C "$work/plugins" -xf -
cp -r ../wit "$work/wit"
target_dir="$work/target"

# clang looks for headers under <sysroot>/include/<triple>: give it Debian's wasi-libc there.
sysroot="$target_dir/sysroot"
mkdir -p "$sysroot/include"
ln -sfn /usr/include/wasm32-wasi "$sysroot/include/wasm32-wasip2"

cargo_home="${CARGO_HOME:-$HOME/.cargo}"
export CC_wasm32_wasip2=clang-22
export AR_wasm32_wasip2=llvm-ar-22
export CFLAGS_wasm32_wasip2="--target=wasm32-wasip2 --sysroot=$sysroot -I$work/adapters-lua-compat/shim -ffile-prefix-map=$cargo_home=/cargo"
(cd "$work/adapters-lua-compat" && env -u CARGO_ENCODED_RUSTFLAGS -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET \
    RUSTFLAGS="--remap-path-prefix=$cargo_home=/cargo" \
    cargo build --release --locked --target wasm32-wasip2 --target-dir "$target_dir")

# The adapter WIT is what the component is built from: the files at wit/'s top level (other
# packages, such as wit/policy/, are not part of it).
sources_hash() {
    { find Cargo.toml Cargo.lock build.rs src shim scripts ../plugins/kit/Cargo.toml ../plugins/kit/src -type f;
      find ../wit -maxdepth 1 -type f -name '*.wit'; } \
        | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
}
built="$target_dir/wasm32-wasip2/release/lua_compat.wasm"
if [ "${1:-}" = "--check" ]; then
    # The build is reproducible (same toolchain, no paths in the output): the shipped component
    # must be byte for byte what these sources build.
    if [ "$(cat dist/SOURCES.sha256)" != "$(sources_hash)" ] || ! cmp -s "$built" dist/lua-compat.wasm; then
        echo "dist/lua-compat.wasm is stale: it is not what adapters-lua-compat/ builds;" \
             "run adapters-lua-compat/build.sh and commit dist/" >&2
        exit 1
    fi
    echo "lua-compat: dist/lua-compat.wasm is current (sources $(sources_hash))"
else
    cp "$built" dist/lua-compat.wasm
    sources_hash > dist/SOURCES.sha256
    echo "lua-compat: dist/lua-compat.wasm updated ($(wc -c < dist/lua-compat.wasm) bytes)"
fi
