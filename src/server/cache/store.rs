//! The cache's entries in this process: bounded in total bytes (the least recently used
//! evicted first, CLOCK-Pro as quick_cache keeps it) and each by its expiry on the gateway's clock.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::key::CacheKey;
use crate::domain::UnixMs;

/// One kept answer: its unified whole form, the upstream's own when a native session answered,
/// and what the books say of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The unified `chat.completion` JSON, rendered in each client's protocol when served.
    pub unified: String,
    /// A native session's whole answer in the client's protocol, as the upstream sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_whole: Option<String>,
    /// A native session's stream in the client's protocol: its SSE frames as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_frames: Option<Vec<String>>,
    /// Whether the unified form stands for the answer in the other mode (JSON for a stream,
    /// a stream for JSON): always for a translated answer, and for an OpenAI-compatible
    /// upstream's own (the unified form is its shape); an Anthropic or Responses upstream's
    /// own answer has what the unified form cannot carry (redacted thinking, server tools).
    #[serde(default)]
    pub cross_mode: bool,
    /// The source that answered it.
    pub source: String,
    pub stored_at: UnixMs,
    pub expires_at: UnixMs,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// What the answer cost when it was asked upstream (pico-dollars; `None`: not known):
    /// what each hit saves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_pico: Option<i64>,
}

impl Entry {
    /// What it weighs against the bound: its text, and what holds it.
    pub fn weight(&self) -> u64 {
        let native = self.native_whole.as_ref().map_or(0, String::len)
            + self.native_frames.as_ref().map_or(0, |f| f.iter().map(|f| f.len() + 24).sum());
        (self.unified.len() + native + self.source.len() + 128) as u64
    }
}

#[derive(Clone)]
struct ByBytes;

impl quick_cache::Weighter<CacheKey, Arc<Entry>> for ByBytes {
    fn weight(&self, _key: &CacheKey, entry: &Arc<Entry>) -> u64 {
        entry.weight()
    }
}

pub struct MemoryStore {
    entries: quick_cache::sync::Cache<CacheKey, Arc<Entry>, ByBytes>,
    max_entry: u64,
}

impl MemoryStore {
    /// At most `max_bytes` in all, `max_entry` bytes each.
    pub fn new(max_bytes: u64, max_entry: u64) -> MemoryStore {
        // Each shard holds a share of the bound; every share must take several of the largest
        // entries, or one would be refused for its shard's size.
        let shards = (max_bytes / max_entry.max(1) / 4).clamp(1, 16) as usize;
        let options = quick_cache::OptionsBuilder::new()
            .shards(shards)
            .estimated_items_capacity(((max_bytes / 4096).clamp(64, 1 << 20)) as usize)
            .weight_capacity(max_bytes)
            .build()
            .expect("shards and capacities are set");
        MemoryStore {
            entries: quick_cache::sync::Cache::with_options(options, ByBytes, Default::default(), Default::default()),
            max_entry,
        }
    }

    /// The entry under `key` unless it expired by `now` (an expired one is dropped).
    pub fn get(&self, key: &CacheKey, now: UnixMs) -> Option<Arc<Entry>> {
        let entry = self.entries.get(key)?;
        if entry.expires_at <= now {
            self.entries.remove_if(key, |e| e.expires_at <= now);
            return None;
        }
        Some(entry)
    }

    /// Keeps `entry` (an entry larger than an entry may be is not kept).
    pub fn put(&self, key: CacheKey, entry: Entry) -> bool {
        if entry.weight() > self.max_entry {
            return false;
        }
        self.entries.insert(key, Arc::new(entry));
        true
    }

    /// Forgets every entry.
    pub fn purge(&self) {
        self.entries.clear();
    }

    /// (entries, bytes held).
    pub fn size(&self) -> (usize, u64) {
        (self.entries.len(), self.entries.weight())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text_bytes: usize, expires_at: u64) -> Entry {
        Entry {
            unified: "x".repeat(text_bytes),
            native_whole: None,
            native_frames: None,
            cross_mode: true,
            source: "s".into(),
            stored_at: UnixMs(0),
            expires_at: UnixMs(expires_at),
            tokens_in: 1,
            tokens_out: 2,
            cost_pico: None,
        }
    }

    fn key(n: u32) -> CacheKey {
        let mut k = [0u8; 32];
        k[..4].copy_from_slice(&n.to_le_bytes());
        CacheKey(k)
    }

    #[test]
    fn an_entry_is_served_until_it_expires_on_the_clock_it_was_given() {
        let store = MemoryStore::new(1 << 20, 64 << 10);
        assert!(store.put(key(1), entry(10, 1_000)));
        assert_eq!(store.get(&key(1), UnixMs(999)).map(|e| e.tokens_out), Some(2));
        assert!(store.get(&key(1), UnixMs(1_000)).is_none());
        assert_eq!(store.size().0, 0, "the expired entry is dropped when found");
        assert!(store.get(&key(2), UnixMs(0)).is_none());
    }

    #[test]
    fn the_total_bound_holds_under_a_burst_of_distinct_large_entries() {
        let (max_bytes, max_entry) = (1u64 << 20, 64u64 << 10);
        let store = MemoryStore::new(max_bytes, max_entry);
        for n in 0..2_000 {
            store.put(key(n), entry(60 << 10, u64::MAX));
            assert!(store.size().1 <= max_bytes, "{} bytes held after {n} entries", store.size().1);
        }
        let (count, bytes) = store.size();
        assert!(count >= 8 && bytes > max_bytes / 2, "the store still holds what fits: {count} entries, {bytes} bytes");
        // The newest are there (the oldest went first).
        assert!(store.get(&key(1_999), UnixMs(0)).is_some());
        assert!(store.get(&key(0), UnixMs(0)).is_none());
    }

    #[test]
    fn an_entry_over_the_entry_bound_is_not_kept_and_purge_forgets_all() {
        let store = MemoryStore::new(1 << 20, 1 << 10);
        assert!(!store.put(key(1), entry(2 << 10, u64::MAX)));
        assert!(store.get(&key(1), UnixMs(0)).is_none());
        assert!(store.put(key(2), entry(100, u64::MAX)));
        store.purge();
        assert_eq!(store.size(), (0, 0));
    }
}
