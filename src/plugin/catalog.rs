//! Which adapters and policies exist: the components embedded at build time, and the files an
//! operator put in `adapter_dir`.

use std::path::{Path, PathBuf};

use super::LoadWarning;

/// Built-in adapters, compiled from `plugins/` by build.rs.
pub const BUILTIN_ADAPTERS: &[(&str, &[u8])] = &[
    ("openai", include_bytes!(concat!(env!("OUT_DIR"), "/guests/openai.wasm"))),
    ("openai-responses", include_bytes!(concat!(env!("OUT_DIR"), "/guests/openai_responses.wasm"))),
    ("anthropic", include_bytes!(concat!(env!("OUT_DIR"), "/guests/anthropic.wasm"))),
    ("ollama", include_bytes!(concat!(env!("OUT_DIR"), "/guests/ollama.wasm"))),
    ("deepseek", include_bytes!(concat!(env!("OUT_DIR"), "/guests/deepseek.wasm"))),
    ("gemini", include_bytes!(concat!(env!("OUT_DIR"), "/guests/gemini.wasm"))),
];

/// Built-in policies (`wit/policy`), compiled from `plugins/` by build.rs; a config's
/// `policies[].plugin` names one of these or a `.wasm` file.
pub const BUILTIN_POLICIES: &[(&str, &[u8])] = &[
    ("redact-pii", include_bytes!(concat!(env!("OUT_DIR"), "/guests/redact_pii.wasm"))),
    ("block-secrets", include_bytes!(concat!(env!("OUT_DIR"), "/guests/block_secrets.wasm"))),
    ("deny-list", include_bytes!(concat!(env!("OUT_DIR"), "/guests/deny_list.wasm"))),
    ("limits", include_bytes!(concat!(env!("OUT_DIR"), "/guests/limits.wasm"))),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdapterOrigin {
    Builtin,
    File(PathBuf),
}

/// The `*.lua` and `*.wasm` files of `adapter_dir`, sorted (so `NAME.wasm` loads after, and
/// wins over, `NAME.lua`); a missing directory is simply empty.
pub fn adapter_files(dir: &Path, warnings: &mut Vec<LoadWarning>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warnings.push(LoadWarning { file: dir.to_path_buf(), message: format!("cannot list adapter_dir: {e}") });
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "wasm" || ext == "lua"))
        .collect();
    files.sort();
    files
}
