//! Tools for adapter authors (`switchyard adapter ...`): load an adapter exactly as the gateway
//! would, replay recorded cases through it, check it, and start a new project from a template;
//! and the same for policy authors (`switchyard policy ...`, in `policy`).

mod cases;
mod check;
mod matching;
mod policy;
mod replay;
mod scaffold;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use cases::{Case, Outcome, case_files, read_case, run as run_case};
pub use check::check;
pub use matching::{Match, differences};
pub use policy::{
    LoadedPolicy, PolicyCase, PolicyOutcome, check_policy, load_policy, read_policy_case, run_policy_case,
    test_policy_cases,
};
pub use replay::{Replayed, StreamStep, replay as replay_stream};
pub use scaffold::{Kind, Language, new_project, new_project_of};

use crate::config::{AdapterName, DEFAULT_BODY_LIMIT_MB, SandboxConfig};
use crate::domain::AdapterGrant;
use crate::plugin::{Adapter, AdapterOrigin, LoadReport, PluginHost};

/// What an author may set as an operator would under `adapters.NAME` (same meaning).
#[derive(Debug, Clone, Default)]
pub struct AuthorLimits {
    pub memory_mb: Option<u32>,
    pub cpu_ms_per_call: Option<u64>,
}

/// An adapter loaded for an author, with what loading it cost.
pub struct Loaded {
    pub host: PluginHost,
    pub adapter: Arc<Adapter>,
    /// The component's bytes (a `.lua` script's are the Lua-compat component's).
    pub wasm: Option<Vec<u8>>,
    /// Time to compile (or read from the cache) and prove the component runs.
    pub load_time: Duration,
    pub from_cache: bool,
}

/// Loads `target` — a `.wasm` component, a `.lua` script or a built-in adapter's name — in the
/// sandbox the gateway uses with its default config (and the author's limits, if given).
pub async fn load(target: &str, cache_dir: Option<PathBuf>, limits: &AuthorLimits) -> Result<Loaded, String> {
    let path = Path::new(target);
    let is_file = path.extension().is_some_and(|x| x == "wasm" || x == "lua") || path.exists();
    let name = if is_file {
        let stem = path.file_stem().and_then(|s| s.to_str()).ok_or_else(|| format!("`{target}` has no file name"))?;
        AdapterName::new(stem)
    } else {
        AdapterName::new(target)
    };
    let grant = AdapterGrant {
        memory_bytes: limits.memory_mb.map(|mb| (mb as usize) << 20),
        cpu_per_call: limits.cpu_ms_per_call.map(Duration::from_millis),
        ..AdapterGrant::default()
    };
    let defaults = SandboxConfig::default().limits((DEFAULT_BODY_LIMIT_MB as usize) << 20);
    let grants = HashMap::from([(name.clone(), grant)]);
    let (host, _) = PluginHost::load(defaults, cache_dir, None, grants)
        .await
        .map_err(|e| format!("the WebAssembly engine did not start: {e:#}"))?;
    if !is_file {
        let adapter = host.adapter(&name).ok_or_else(|| {
            format!("`{target}` is neither a .wasm or .lua file nor a built-in adapter ({})", host.names().join(", "))
        })?;
        let wasm = crate::plugin::BUILTIN_ADAPTERS.iter().find(|(n, _)| *n == name.as_str()).map(|(_, w)| w.to_vec());
        return Ok(Loaded { host, adapter, wasm, load_time: Duration::ZERO, from_cache: true });
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {target}: {e}"))?;
    let origin = AdapterOrigin::File(path.to_path_buf());
    let started = Instant::now();
    let mut report = LoadReport::default();
    let (adapter, wasm) = if path.extension().is_some_and(|x| x == "lua") {
        let script = String::from_utf8(bytes).map_err(|_| format!("{target}: a Lua script must be UTF-8 text"))?;
        (host.check_lua(&name, origin, &script).await?, None)
    } else {
        (host.check_reporting(&name, origin, &bytes, &mut report).await?, Some(bytes))
    };
    let load_time = started.elapsed();
    let from_cache = report.compiled == 0;
    Ok(Loaded { host, adapter, wasm, load_time, from_cache })
}

/// Where compiled components are cached between runs of the author's tools: the user's cache,
/// which a gateway on this machine shares.
pub fn default_cache_dir() -> Option<PathBuf> {
    crate::config::user_cache_dir()
}

/// `switchyard adapter test`: plays every case in `dir`; prints one line per case and a
/// readable list of differences for each that fails. True when all passed.
pub async fn test_cases(loaded: &Loaded, dir: &Path) -> Result<bool, String> {
    let files = case_files(dir)?;
    let (mut passed, mut failed) = (0, 0);
    for file in &files {
        let shown = file.strip_prefix(std::env::current_dir().unwrap_or_default()).unwrap_or(file).display();
        let case = match read_case(file) {
            Ok(case) => case,
            Err(e) => {
                println!("FAIL {shown}: {e}");
                failed += 1;
                continue;
            }
        };
        let outcome = run_case(&loaded.adapter, &case, dir).await;
        let about = if case.about.is_empty() { String::new() } else { format!(": {}", case.about) };
        if outcome.failures.is_empty() {
            println!("ok   {shown}{about} ({})", outcome.summary);
            passed += 1;
        } else {
            println!("FAIL {shown}{about} ({})", outcome.summary);
            for line in &outcome.failures {
                println!("  {line}");
            }
            failed += 1;
        }
    }
    println!("{} cases: {passed} passed, {failed} failed", files.len());
    Ok(failed == 0)
}
