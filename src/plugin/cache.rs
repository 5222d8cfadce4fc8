//! On-disk cache of compiled components (the user's cache, shared by the gateway and the
//! author's tools), keyed by the engine's compatibility hash and the component's sha256, so a
//! restart skips Cranelift; bounded per adapter and in all, the least recently used let go.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Entries kept per adapter name (its newest builds), whatever engine made them.
const KEEP_PER_ADAPTER: usize = 3;
/// The cache's size in all; past it the least recently used entries go.
const MAX_CACHE_BYTES: u64 = 1 << 30;

/// Where a component came from on this load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    Hit,
    Compiled,
}

pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

impl ComponentCache {
    /// `dir: None` disables the cache (every load compiles).
    pub fn new(dir: Option<PathBuf>, engine: &Engine) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        ComponentCache { dir, engine_key: format!("{:016x}", hasher.finish()) }
    }

    /// Adapter `name`'s component for `wasm`: from the cache, else compiled (and said so, with
    /// its size and the time it took: seconds for a large one) and kept for next time.
    pub fn load(&self, engine: &Engine, name: &str, wasm: &[u8]) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, wasm)?, CacheOutcome::Compiled));
        };
        let digest = Sha256::digest(wasm);
        let hash: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        // The name as a file name may hold it (an author's file stem may hold anything).
        let file_name: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
        let path = dir.join(format!("{}-{file_name}-{hash}.cwasm", self.engine_key));
        // Read into memory rather than mmap: a file truncated under us cannot then fault.
        if let Ok(bytes) = std::fs::read(&path) {
            // SAFETY: the file is ours: written below by this engine configuration, named by
            // the hash of the exact wasm bytes and the engine's compatibility hash; wasmtime
            // still checks its header and engine compatibility.
            match unsafe { Component::deserialize(engine, &bytes) } {
                Ok(component) => {
                    // Used now: the last to be let go.
                    let _ = std::fs::File::options()
                        .append(true)
                        .open(&path)
                        .and_then(|f| f.set_modified(SystemTime::now()));
                    return Ok((component, CacheOutcome::Hit));
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring unreadable compiled-component cache entry: {e}")
                }
            }
        }
        let kib = wasm.len() >> 10;
        tracing::info!(adapter = name, wasm_kib = kib, "compiling the adapter's component (once: it is cached after)");
        let started = Instant::now();
        let component = Component::new(engine, wasm)?;
        tracing::info!(adapter = name, wasm_kib = kib, ms = started.elapsed().as_millis() as u64, cache = %dir.display(), "compiled");
        if let Err(e) = self.store(&path, &component) {
            tracing::warn!(path = %path.display(), "could not write compiled-component cache: {e}");
        }
        prune(dir, KEEP_PER_ADAPTER, MAX_CACHE_BYTES);
        Ok((component, CacheOutcome::Compiled))
    }

    fn store(&self, path: &std::path::Path, component: &Component) -> anyhow::Result<()> {
        let bytes = component.serialize().map_err(|e| anyhow::anyhow!("{e}"))?;
        std::fs::create_dir_all(path.parent().expect("cache files live in a directory"))?;
        // Write then rename, so a crash never leaves a half-written entry behind.
        // Unique per writer: several threads (or processes) may compile the same component at once.
        let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(tmp, path)?;
        Ok(())
    }
}

/// One cache entry: its file, the adapter it is of, its size and when it was last used.
struct Entry {
    path: PathBuf,
    adapter: String,
    bytes: u64,
    used: SystemTime,
}

/// Lets go of all but the `keep` most recently used entries of each adapter, then of the least
/// recently used until the whole is at most `max_bytes`. Files another process is writing
/// (`.tmp-…`) or reading are not ours to hold up: a deleted entry is compiled again if needed.
fn prune(dir: &Path, keep: usize, max_bytes: u64) {
    let Ok(listing) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<Entry> = listing
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let path = e.path();
            let stem = path.file_name()?.to_str()?.strip_suffix(".cwasm")?;
            // `{engine}-{adapter}-{hash}`: the adapter is what lies between (names may hold `-`).
            let adapter = stem.split_once('-').and_then(|(_, rest)| rest.rsplit_once('-')).map_or("", |(a, _)| a);
            let meta = e.metadata().ok()?;
            Some(Entry { adapter: adapter.to_string(), bytes: meta.len(), used: meta.modified().ok()?, path })
        })
        .collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.used));
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut total = 0u64;
    for entry in entries {
        let count = seen.entry(entry.adapter.clone()).or_default();
        *count += 1;
        if *count > keep || total + entry.bytes > max_bytes {
            match std::fs::remove_file(&entry.path) {
                Ok(()) => tracing::debug!(path = %entry.path.display(), "compiled-component cache entry let go"),
                Err(e) => tracing::debug!(path = %entry.path.display(), "could not let go of a cache entry: {e}"),
            }
            continue;
        }
        total += entry.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &Path, name: &str, bytes: usize, age_s: u64) {
        let path = dir.join(name);
        std::fs::write(&path, vec![0u8; bytes]).unwrap();
        let when = SystemTime::now() - std::time::Duration::from_secs(age_s);
        std::fs::File::options().append(true).open(&path).unwrap().set_modified(when).unwrap();
    }

    #[test]
    fn the_newest_builds_of_each_adapter_stay_within_the_total() {
        let dir = tempfile::tempdir().unwrap();
        for age in 0..6 {
            entry(dir.path(), &format!("e1-my-adapter-{age:032x}.cwasm"), 10, age);
        }
        entry(dir.path(), &format!("e1-other-{:032x}.cwasm", 9), 10, 100);
        entry(dir.path(), &format!("e0-other-{:032x}.cwasm", 8), 10, 200);
        entry(dir.path(), "e1-my-adapter-x.cwasm.tmp-1", 10, 300);
        prune(dir.path(), 3, 45);
        let mut left: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(
            left,
            [
                format!("e1-my-adapter-{:032x}.cwasm", 0),
                format!("e1-my-adapter-{:032x}.cwasm", 1),
                format!("e1-my-adapter-{:032x}.cwasm", 2),
                "e1-my-adapter-x.cwasm.tmp-1".to_string(),
                format!("e1-other-{:032x}.cwasm", 9),
            ],
            "three newest of my-adapter, then other's newest within 45 bytes; a file being written is left alone"
        );
    }
}
