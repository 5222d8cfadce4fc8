//! Checks of `policies:` and of the names keys, routes and sources attach: unique names, a
//! plugin that exists, bounds in range, and no reference to a policy that is not defined.

use std::collections::HashSet;

use super::{Collector, MAX_SECONDS};
use crate::config::{BUILTIN_POLICY_NAMES, KeyConfig, PolicyConfig, PolicyName, RouteConfig, SourceConfig};

impl Collector<'_> {
    pub(super) fn check_policies(&mut self, policies: &[PolicyConfig], sandbox_memory_mb: u64) {
        self.check_policies_at(policies, "policies", sandbox_memory_mb);
    }

    /// [`Self::check_policies`] for the list at `list` (config.yaml's or the runtime file's).
    pub(super) fn check_policies_at(&mut self, policies: &[PolicyConfig], list: &str, sandbox_memory_mb: u64) {
        let mut names = HashSet::new();
        for (i, p) in policies.iter().enumerate() {
            let at = |field: &str| format!("{list}[{i}].{field}");
            if p.name.as_str().is_empty() || !names.insert(p.name.clone()) {
                self.error(
                    &at("name"),
                    format!("policy name `{}` is empty or used twice", p.name),
                    "give every policy its own name",
                );
            }
            if !p.names_a_component() {
                self.error(
                    &at("plugin"),
                    format!("`{}` is neither a built-in policy nor a `.wasm` file", p.plugin),
                    format!(
                        "name one of {}, a component file ending in .wasm, or uploaded:NAME",
                        BUILTIN_POLICY_NAMES.join(", ")
                    ),
                );
            }
            if p.cpu_ms == Some(0) || p.wall_ms == Some(0) {
                self.error(&at("cpu_ms"), "cpu_ms and wall_ms must be at least 1", "e.g. cpu_ms: 50, wall_ms: 1000");
            }
            if p.cpu_ms.into_iter().chain(p.wall_ms).any(|ms| ms as f64 > MAX_SECONDS * 1000.0) {
                self.error(&at("wall_ms"), "must be at most 10000000000 ms (so must cpu_ms)", "e.g. 1000");
            }
            if p.memory_mb.is_some_and(|mb| mb == 0 || u64::from(mb) > sandbox_memory_mb) {
                self.error(
                    &at("memory_mb"),
                    format!("must be between 1 and the sandbox's memory cap ({sandbox_memory_mb} MiB)"),
                    "e.g. 16 (a Rust policy needs a few MiB; raise sandbox.memory_mb for more)",
                );
            }
        }
    }

    /// Every policy a key, route or source names must be defined under `policies:`.
    pub(super) fn check_policy_refs(&mut self, defined: &[PolicyConfig], keys: &[(String, &[PolicyName])]) {
        for (path, names) in keys {
            for (j, name) in names.iter().enumerate() {
                if !defined.iter().any(|p| &p.name == name) {
                    self.error(
                        &format!("{path}.policies[{j}]"),
                        format!("no policy named `{name}`"),
                        "define it under `policies:` (name, plugin) or remove it here",
                    );
                }
            }
        }
    }
}

/// What of keys, routes and sources names policies, with each one's path in the file.
pub(super) fn attached<'a>(
    keys: &'a [KeyConfig],
    routes: &'a [RouteConfig],
    sources: &'a [SourceConfig],
    prefix: &str,
) -> Vec<(String, &'a [PolicyName])> {
    let keys = keys.iter().enumerate().map(|(i, k)| (format!("{prefix}keys[{i}]"), k.policies.as_slice()));
    let routes = routes.iter().enumerate().map(|(i, r)| (format!("{prefix}routes[{i}]"), r.policies.as_slice()));
    let sources = sources.iter().enumerate().map(|(i, s)| (format!("{prefix}sources[{i}]"), s.policies.as_slice()));
    keys.chain(routes).chain(sources).filter(|(_, names)| !names.is_empty()).collect()
}
