//! On-disk cache of compiled components under `data_dir/cache/`, keyed by the engine's
//! compatibility hash and the component's sha256, so a restart skips Cranelift.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

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

    pub fn load(&self, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, wasm)?, CacheOutcome::Compiled));
        };
        let digest = Sha256::digest(wasm);
        let hash: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("{}-{hash}.cwasm", self.engine_key));
        // Read into memory rather than mmap: a file truncated under us cannot then fault.
        if let Ok(bytes) = std::fs::read(&path) {
            // SAFETY: the file is ours: written below by this engine configuration, named by
            // the hash of the exact wasm bytes and the engine's compatibility hash; wasmtime
            // still checks its header and engine compatibility.
            match unsafe { Component::deserialize(engine, &bytes) } {
                Ok(component) => return Ok((component, CacheOutcome::Hit)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring unreadable compiled-component cache entry: {e}")
                }
            }
        }
        let component = Component::new(engine, wasm)?;
        if let Err(e) = self.store(&path, &component) {
            tracing::warn!(path = %path.display(), "could not write compiled-component cache: {e}");
        }
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
