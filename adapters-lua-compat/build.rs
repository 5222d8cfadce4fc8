// Builds the setjmp runtime (libsetjmp.a) and an empty libwasi-emulated-signal.a that the
// vendored Lua build links against, with the C compiler ./build.sh points CC_wasm32_wasip2 at.

fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo::rerun-if-changed=shim");
    // Native builds (the unit tests) use the platform's own setjmp.
    if !std::env::var("TARGET").unwrap_or_default().starts_with("wasm32") {
        return;
    }
    cc::Build::new()
        .file("shim/setjmp.c")
        .flag("-mexception-handling")
        .flag("-mllvm")
        .flag("-wasm-enable-sjlj")
        .flag("-mllvm")
        .flag("-wasm-use-legacy-eh=false")
        .compile("setjmp");
    // WASI has no signals; Lua only needs signal.h to compile. An empty archive satisfies the link.
    cc::Build::new().file("shim/empty.c").compile("wasi-emulated-signal");
    println!("cargo::rustc-link-search=native={}", out.display());
}
