// Builds the guest adapters in plugins/ for wasm32-wasip2 (their own workspace and target dir,
// so the nested cargo never waits on our lock) and copies the components into OUT_DIR/guests.
#![allow(clippy::unwrap_used, reason = "a build script stops the build at its first failure")]

use std::path::{Path, PathBuf};
use std::process::Command;

const GUEST_TARGET: &str = "wasm32-wasip2";
const GUESTS: &[&str] = &[
    "openai",
    "openai_responses",
    "anthropic",
    "ollama",
    "deepseek",
    "gemini",
    "hostile",
    "redact_pii",
    "block_secrets",
    "deny_list",
    "limits",
    "hostile_policy",
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let plugins = manifest_dir.join("plugins");
    println!("cargo::rerun-if-changed=wit");
    println!("cargo::rerun-if-changed=plugins");

    ensure_guest_target();

    // <target>/<profile>/build/<pkg>/out → <target>/guests, shared by every host profile.
    let target_dir = out_dir.ancestors().nth(4).unwrap_or(&out_dir).join("guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&plugins)
        .args(["build", "--release", "--locked", "--target", GUEST_TARGET, "--target-dir"])
        .arg(&target_dir)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_MAKEFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .status()
        .expect("running cargo for the guest adapters");
    if !status.success() {
        panic!(
            "building the guest adapters in plugins/ failed (see above). \
             If the target is missing, run: rustup target add {GUEST_TARGET}"
        );
    }

    let guests_out = out_dir.join("guests");
    std::fs::create_dir_all(&guests_out).unwrap();
    for guest in GUESTS {
        let built = target_dir.join(GUEST_TARGET).join("release").join(format!("{guest}.wasm"));
        copy(&built, &guests_out.join(format!("{guest}.wasm")));
    }
    // Integration tests find the test-only guests (e.g. hostile.wasm) here.
    println!("cargo::rustc-env=SWITCHYARD_GUEST_DIR={}", guests_out.display());
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), to.display()));
}

/// A fresh rustup install lacks the wasm32-wasip2 standard library: add it rather than fail.
fn ensure_guest_target() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc).args(["--print", "sysroot"]).output().ok().filter(|o| o.status.success());
    let Some(sysroot) = sysroot.map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())) else {
        return;
    };
    if sysroot.join("lib/rustlib").join(GUEST_TARGET).exists() {
        return;
    }
    println!("cargo::warning=installing the {GUEST_TARGET} target with rustup (needed to build the built-in adapters)");
    let added = Command::new("rustup").args(["target", "add", GUEST_TARGET]).status();
    if !matches!(added, Ok(s) if s.success()) {
        panic!("the {GUEST_TARGET} target is missing and `rustup target add {GUEST_TARGET}` failed; run it by hand");
    }
}
