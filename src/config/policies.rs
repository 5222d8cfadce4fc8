//! `policies:`: the policy plugins an operator runs (a built-in or a `.wasm` file), each with
//! its settings, what its failure means, its limits, and whether every request passes it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::PolicyName;

/// The built-in policies' names (the components are embedded by the plugin host).
pub const BUILTIN_POLICY_NAMES: &[&str] = &["redact-pii", "block-secrets", "deny-list", "limits"];

/// One policy: a component and how it runs. Keys, routes and sources attach it by `name`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    pub name: PolicyName,
    /// A built-in policy (`redact-pii`, `block-secrets`, `deny-list`, `limits`), a component
    /// file ending in `.wasm` (a relative path, like every path in the config, is read from the
    /// gateway's working directory), or `uploaded:NAME`: the component uploaded through the
    /// admin API, `data_dir/policies/NAME.wasm` on every replica.
    pub plugin: String,
    /// Handed to the component as they are (its own settings; see docs/policies.md).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// What a trap, a limit or a timeout in this policy means for the request.
    #[serde(default)]
    pub on_error: OnError,
    /// Every request passes it (else only those of the keys, routes and sources naming it).
    #[serde(default)]
    pub global: bool,
    /// Bounds of one call, below `sandbox:`'s (which apply when left out).
    #[serde(default)]
    pub cpu_ms: Option<u64>,
    #[serde(default)]
    pub wall_ms: Option<u64>,
    #[serde(default)]
    pub memory_mb: Option<u32>,
}

impl PolicyConfig {
    /// The component file it names, uploaded ones under `data_dir`; `None`: a built-in.
    pub fn file(&self, data_dir: &std::path::Path) -> Option<PathBuf> {
        match self.plugin.strip_prefix(UPLOADED) {
            Some(name) => Some(uploaded_file(data_dir, name)),
            None => self.plugin.ends_with(".wasm").then(|| PathBuf::from(&self.plugin)),
        }
    }
}

/// How `plugin:` names an uploaded component: `uploaded:NAME`.
pub const UPLOADED: &str = "uploaded:";

/// Where the component uploaded for policy `name` is kept.
pub fn uploaded_file(data_dir: &std::path::Path, name: &str) -> PathBuf {
    data_dir.join("policies").join(format!("{name}.wasm"))
}

impl PolicyConfig {
    /// Whether `plugin:` names something that can exist: a built-in, a `.wasm` file, or an
    /// upload by a name an upload may have.
    pub fn names_a_component(&self) -> bool {
        match self.plugin.strip_prefix(UPLOADED) {
            Some(name) => !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            None => self.plugin.ends_with(".wasm") || BUILTIN_POLICY_NAMES.contains(&self.plugin.as_str()),
        }
    }
}

/// A policy's `on_error:`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// The request goes on as if the policy had allowed it (logged and counted).
    Open,
    /// The request is refused (503 `policy_failed`); a stream ends with an error event.
    #[default]
    Closed,
}
