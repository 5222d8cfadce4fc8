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
    /// A built-in policy (`redact-pii`, `block-secrets`, `deny-list`, `limits`) or a
    /// component file ending in `.wasm` (a relative path, like every path in the config, is
    /// read from the gateway's working directory).
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
    /// The component file it names; `None`: a built-in.
    pub fn file(&self) -> Option<PathBuf> {
        self.plugin.ends_with(".wasm").then(|| PathBuf::from(&self.plugin))
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
