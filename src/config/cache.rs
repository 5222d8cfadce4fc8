//! `cache:`: how long answers are kept, how big one and all may be, and which key groups
//! share entries. Whether a request is cached at all is said on its key, route or sources.

use serde::{Deserialize, Serialize};

use crate::domain::GroupName;

/// The response cache's bounds (a restart changes them).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// How long an answer is served from the cache; a request may ask for less
    /// (`x-switchyard-cache-ttl`).
    pub ttl_seconds: u64,
    /// Larger answers are not kept.
    pub max_entry_kb: u64,
    /// All entries together; the least recently used go first.
    pub max_mb: u64,
    /// Key groups whose keys share entries; every other key has its own.
    pub shared_groups: Vec<GroupName>,
    /// Whether a hit's tokens count against the key's token quota (they cost nothing upstream).
    pub hits_count_against_quotas: bool,
    /// The semantic cache, for routes with `semantic_cache: true`; off when left out.
    pub semantic: Option<SemanticConfig>,
}

/// How the semantic cache embeds prompts and how alike two must be.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SemanticConfig {
    /// The embeddings model (a configured `kind: embedding` model, or a route to one).
    pub model: String,
    /// The least cosine similarity between two last user messages for one to answer the other.
    #[serde(default = "default_threshold")]
    pub threshold: f32,
    /// Prompts remembered (each holds its embedding: width × 4 bytes).
    #[serde(default = "default_max_entries")]
    pub max_entries: usize,
    /// Longer last messages are not embedded.
    #[serde(default = "default_max_prompt_kb")]
    pub max_prompt_kb: usize,
}

fn default_threshold() -> f32 {
    0.95
}

fn default_max_entries() -> usize {
    5000
}

fn default_max_prompt_kb() -> usize {
    16
}

/// Longest `ttl_seconds`: 30 days.
pub const MAX_CACHE_TTL_SECONDS: u64 = 30 * 24 * 3600;

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            ttl_seconds: 3600,
            max_entry_kb: 1024,
            max_mb: 64,
            shared_groups: Vec::new(),
            hits_count_against_quotas: false,
            semantic: None,
        }
    }
}

impl CacheConfig {
    pub fn max_entry_bytes(&self) -> usize {
        usize::try_from(self.max_entry_kb << 10).unwrap_or(usize::MAX)
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_mb << 20
    }

    /// The first thing wrong with it, as (field under `cache`, what, fix).
    pub fn problem(&self) -> Option<(&'static str, String, &'static str)> {
        if !(1..=MAX_CACHE_TTL_SECONDS).contains(&self.ttl_seconds) {
            return Some(("ttl_seconds", format!("must be between 1 and {MAX_CACHE_TTL_SECONDS}"), "e.g. 3600"));
        }
        if !(1..=1 << 20).contains(&self.max_mb) {
            return Some(("max_mb", "must be between 1 and 1048576".into(), "e.g. 64 (the default)"));
        }
        if self.max_entry_kb == 0 || self.max_entry_kb > self.max_mb << 10 {
            return Some((
                "max_entry_kb",
                format!("must be between 1 and max_mb in KiB ({})", self.max_mb << 10),
                "e.g. 1024 (the default)",
            ));
        }
        if let Some(semantic) = &self.semantic {
            if semantic.model.is_empty() {
                return Some(("semantic.model", "is empty".into(), "name a kind: embedding model"));
            }
            if !(semantic.threshold > 0.0 && semantic.threshold <= 1.0) {
                return Some(("semantic.threshold", "must be above 0 and at most 1".into(), "e.g. 0.95"));
            }
            if !(1..=1_000_000).contains(&semantic.max_entries) {
                return Some(("semantic.max_entries", "must be between 1 and 1000000".into(), "e.g. 5000"));
            }
            if !(1..=1024).contains(&semantic.max_prompt_kb) {
                return Some(("semantic.max_prompt_kb", "must be between 1 and 1024".into(), "e.g. 16"));
            }
        }
        None
    }
}
