//! Lua adapters: the Lua-compat component (built from `adapters-lua-compat/`, shipped in its
//! `dist/`), the legacy built-in scripts bundled with it, and writing those out to
//! `adapter_dir` so operators can read and edit them: a `.bundled` manifest of the hashes
//! written lets an update replace untouched files and leave edited ones alone.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The component that runs every Lua adapter script.
pub const COMPONENT: &[u8] = include_bytes!("../../adapters-lua-compat/dist/lua-compat.wasm");

/// The legacy built-ins as Lua, as `(adapter name, script)`; written to `adapter_dir/NAME.lua`.
pub const BUNDLED_SCRIPTS: &[(&str, &str)] = &[
    ("lua-openai", include_str!("../../adapters-lua-compat/scripts/openai.lua")),
    ("lua-anthropic", include_str!("../../adapters-lua-compat/scripts/anthropic.lua")),
    ("lua-deepseek", include_str!("../../adapters-lua-compat/scripts/deepseek.lua")),
    ("lua-gemini", include_str!("../../adapters-lua-compat/scripts/gemini.lua")),
    ("lua-groq", include_str!("../../adapters-lua-compat/scripts/groq.lua")),
    ("lua-mistral", include_str!("../../adapters-lua-compat/scripts/mistral.lua")),
    ("lua-ollama", include_str!("../../adapters-lua-compat/scripts/ollama.lua")),
];

const MANIFEST: &str = ".bundled";

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes the bundled scripts into `dir`. A file is (re)written when it is missing or still
/// exactly what an earlier version wrote (its hash is in the manifest); a file the operator
/// edited, or wrote themselves, is left alone.
pub fn write_bundled(dir: &Path) -> std::io::Result<()> {
    crate::private_fs::create_dir(dir)?;
    let manifest_path = dir.join(MANIFEST);
    let mut manifest: BTreeMap<String, String> = std::fs::read_to_string(&manifest_path)
        .map(|text| {
            text.lines()
                .filter_map(|line| line.split_once(' ').map(|(hash, file)| (file.to_string(), hash.to_string())))
                .collect()
        })
        .unwrap_or_default();
    for (name, script) in BUNDLED_SCRIPTS {
        let file = format!("{name}.lua");
        let path = dir.join(&file);
        let wanted = sha256_hex(script.as_bytes());
        let current = match std::fs::read(&path) {
            Ok(bytes) => Some(sha256_hex(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        match current {
            Some(hash) if hash == wanted => {
                manifest.insert(file, wanted);
            }
            // Missing, or exactly what an earlier version wrote: (re)write it.
            None => write_script(&path, script, &mut manifest, file, wanted)?,
            Some(hash) if manifest.get(&file) == Some(&hash) => {
                write_script(&path, script, &mut manifest, file, wanted)?
            }
            Some(_) => {
                tracing::info!(file = %path.display(), "bundled Lua script edited by the operator: left as it is")
            }
        }
    }
    let text: String = manifest.iter().map(|(file, hash)| format!("{hash} {file}\n")).collect();
    std::fs::write(manifest_path, text)
}

fn write_script(
    path: &Path,
    script: &str,
    manifest: &mut BTreeMap<String, String>,
    file: String,
    hash: String,
) -> std::io::Result<()> {
    std::fs::write(path, script)?;
    manifest.insert(file, hash);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_replaces_untouched_scripts_and_keeps_edited_ones() {
        let dir = tempfile::tempdir().unwrap();
        write_bundled(dir.path()).unwrap();
        let openai = dir.path().join("lua-openai.lua");
        let groq = dir.path().join("lua-groq.lua");
        assert_eq!(std::fs::read_to_string(&openai).unwrap(), BUNDLED_SCRIPTS[0].1);

        // An older version wrote different text for both; the operator edited groq since.
        let old = "-- an older bundled version\n";
        std::fs::write(&openai, old).unwrap();
        std::fs::write(&groq, "-- mine now\n").unwrap();
        let manifest = dir.path().join(MANIFEST);
        let text = std::fs::read_to_string(&manifest).unwrap();
        let old_hash = sha256_hex(old.as_bytes());
        let text = text.replace(&sha256_hex(BUNDLED_SCRIPTS[0].1.as_bytes()), &old_hash);
        std::fs::write(&manifest, text).unwrap();

        write_bundled(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&openai).unwrap(), BUNDLED_SCRIPTS[0].1, "untouched: updated");
        assert_eq!(std::fs::read_to_string(&groq).unwrap(), "-- mine now\n", "edited: kept");
        std::fs::remove_file(&openai).unwrap();
        write_bundled(dir.path()).unwrap();
        assert!(openai.exists(), "a deleted bundled script comes back");
    }
}
