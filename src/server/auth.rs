//! Gateway keys: `Authorization: Bearer` lookup by digest (no plaintext compare loops) and
//! model scopes.

use std::collections::HashMap;

use axum::http::{HeaderMap, StatusCode, header};
use sha2::{Digest, Sha256};

use super::error::{ApiError, ErrorType};
use crate::config::{Config, GroupName, KeyConfig, KeyName};
use crate::scheduler::Quota;

/// What a key may use: exact names, `source/model`, `*`, or a trailing-`*` prefix.
#[derive(Debug, Clone)]
pub struct ModelScope {
    patterns: Vec<String>,
}

impl ModelScope {
    pub fn new(patterns: Vec<String>) -> Self {
        ModelScope { patterns }
    }

    /// True when any of `names` (the requested name, and what it resolved to) is in scope.
    pub fn allows(&self, names: &[&str]) -> bool {
        self.patterns.iter().any(|p| names.iter().any(|n| matches(p, n)))
    }
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

#[derive(Debug, Clone)]
pub struct KeyEntry {
    /// Stable while the secret is: what a key owns (stored responses) is owned by this, so a
    /// new key that takes a deleted key's name owns nothing of it.
    pub id: String,
    pub name: KeyName,
    pub scope: ModelScope,
    pub group: GroupName,
    /// Tokens it may use per period.
    pub quota: Option<Quota>,
    /// USD it may spend per period.
    pub budget: Option<crate::domain::Budget>,
    /// Whether its answers are cached (`None`: as its route or sources say).
    pub cache: Option<bool>,
    /// Policies its requests pass after the global ones (`keys[].policies`).
    pub policies: Vec<crate::config::PolicyName>,
}

impl KeyEntry {
    /// The same key for the gateway's own calls on its behalf (a route's vision model or
    /// judge): the route was in scope, so what it calls is too.
    pub fn internal(&self) -> KeyEntry {
        KeyEntry { scope: ModelScope::new(vec!["*".into()]), ..self.clone() }
    }
}

pub struct KeyTable {
    by_digest: HashMap<[u8; 32], KeyEntry>,
}

impl KeyTable {
    /// config.yaml's keys (by their secrets) and runtime keys (by the digests kept of them).
    pub fn new(config: &Config) -> Self {
        let entry = |k: &KeyConfig, digest: &[u8; 32]| KeyEntry {
            id: key_id(digest),
            name: k.name.clone(),
            scope: ModelScope::new(k.models.clone()),
            group: k.group.clone(),
            quota: k.quota(),
            budget: k.budget,
            cache: k.cache,
            policies: k.policies.clone(),
        };
        let mut by_digest: HashMap<[u8; 32], KeyEntry> = config
            .keys
            .iter()
            .map(|k| {
                let d = digest(k.key.expose());
                (d, entry(k, &d))
            })
            .collect();
        for k in &config.runtime_keys {
            if let Some(d) = from_hex(&k.key_sha256) {
                by_digest.insert(d, entry(&k.as_key_config(), &d));
            }
        }
        KeyTable { by_digest }
    }

    pub fn authenticate(&self, headers: &HeaderMap) -> Result<&KeyEntry, ApiError> {
        let unauthorized = |message: &str| {
            ApiError::new(StatusCode::UNAUTHORIZED, ErrorType::Authentication, message).code("invalid_api_key")
        };
        // Anthropic clients send their key as `x-api-key`.
        if let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
            return self.by_digest.get(&digest(key.trim())).ok_or_else(|| unauthorized("invalid gateway key"));
        }
        let value = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or_else(|| {
            unauthorized("missing gateway key: send it as `Authorization: Bearer <key>` or `x-api-key: <key>`")
        })?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or_else(|| unauthorized("the Authorization header must be `Bearer <key>`"))?;
        self.by_digest.get(&digest(token)).ok_or_else(|| unauthorized("invalid gateway key"))
    }
}

/// A key's id: the first 8 bytes of its secret's digest, in hex (nothing of the secret).
fn key_id(digest: &[u8; 32]) -> String {
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The id of a config.yaml key (by its secret) or a runtime key (by its digest).
pub fn id_of_secret(secret: &str) -> String {
    key_id(&digest(secret))
}

pub fn id_of_digest_hex(hex: &str) -> Option<String> {
    from_hex(hex).map(|d| key_id(&d))
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The digest a runtime key is kept as, in hex.
pub fn digest_hex(key: &str) -> String {
    digest(key).iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_match_exact_prefix_and_star() {
        let scope = ModelScope::new(vec!["gpt-4o".into(), "claude-*".into(), "local/llama3".into()]);
        assert!(scope.allows(&["gpt-4o"]));
        assert!(!scope.allows(&["gpt-4o-mini"]));
        assert!(scope.allows(&["claude-sonnet-4"]));
        assert!(scope.allows(&["llama3", "local/llama3"]));
        assert!(!scope.allows(&["llama3", "other/llama3"]));
        assert!(ModelScope::new(vec!["*".into()]).allows(&["anything"]));
        assert!(!ModelScope::new(vec![]).allows(&["anything"]));
    }
}
