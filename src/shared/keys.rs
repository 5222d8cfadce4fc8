//! The Redis names of everything replicas share, under one prefix (several gateways may share
//! a Redis): counters per window, the cooldown hash, probe claims, the runtime copy, the
//! event channel. Pure functions, so the layout is written (and tested) in one place.

use crate::domain::{Account, Period, SlotKey, SourceName, UnixMs};

/// Separates the parts of a name: it cannot occur in configured names.
const SEP: char = '\u{1f}';

#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: &str) -> Keys {
        Keys { prefix: prefix.to_string() }
    }

    /// Tokens a slot used in the `period` window starting at `start`.
    pub fn slot_tokens(&self, slot: &SlotKey, period: Period, start: UnixMs) -> String {
        format!("{}:q:{}{SEP}{}{SEP}{period}{SEP}{}", self.prefix, slot.source, slot.model, start.0)
    }

    /// What an account (a key's tokens, a key's or group's pico-dollars) used in the `period`
    /// window starting at `start`.
    pub fn account(&self, account: &Account, period: Period, start: UnixMs) -> String {
        let (kind, name) = match account {
            Account::Tokens(key) => ("k", key.as_str()),
            Account::KeyUsd(key) => ("usd:k", key.as_str()),
            Account::GroupUsd(group) => ("usd:g", group.as_str()),
        };
        format!("{}:{kind}:{name}{SEP}{period}{SEP}{}", self.prefix, start.0)
    }

    /// Requests a source started in one second (`second` = Unix seconds).
    pub fn rpm(&self, source: &SourceName, second: u64) -> String {
        format!("{}:rpm:{}{SEP}{second}", self.prefix, source)
    }

    /// The one probe of a cooling slot, held by the replica running it.
    pub fn probe(&self, slot: &SlotKey) -> String {
        format!("{}:probe:{}{SEP}{}", self.prefix, slot.source, slot.model)
    }

    /// The claim a live replica holds on its name (counters are kept per replica name, so two
    /// live replicas of one name would overwrite each other's).
    pub fn replica_claim(&self, name: &str) -> String {
        format!("{}:replica:{}", self.prefix, name)
    }

    /// Hash: slot (JSON) → its health (JSON), for replicas that were away.
    pub fn cooldowns(&self) -> String {
        format!("{}:cooldowns", self.prefix)
    }

    /// Raised with every change to the cooldown hash, so replicas re-read it only then.
    pub fn cooldowns_version(&self) -> String {
        format!("{}:cooldowns:version", self.prefix)
    }

    pub fn runtime_version(&self) -> String {
        format!("{}:runtime:version", self.prefix)
    }

    pub fn runtime_file(&self) -> String {
        format!("{}:runtime:file", self.prefix)
    }

    pub fn runtime_from(&self) -> String {
        format!("{}:runtime:from", self.prefix)
    }

    /// Hash: adapter name → its uploaded bytes.
    pub fn adapters(&self) -> String {
        format!("{}:adapters", self.prefix)
    }

    /// Hash: adapter name → the SHA-256 of its bytes (read without the bytes).
    pub fn adapter_hashes(&self) -> String {
        format!("{}:adapters:sha256", self.prefix)
    }

    /// A cached answer's entry: `{prefix}:cache:e:` then the hex of its key.
    pub fn cache_entry_prefix(&self) -> String {
        format!("{}:cache:e:", self.prefix)
    }

    /// Sorted set: cached entry id → when it was last stored or served (the eviction order).
    pub fn cache_index(&self) -> String {
        format!("{}:cache:index", self.prefix)
    }

    /// Hash: cached entry id → its size in bytes.
    pub fn cache_sizes(&self) -> String {
        format!("{}:cache:sizes", self.prefix)
    }

    /// The bytes of every cached entry together.
    pub fn cache_bytes(&self) -> String {
        format!("{}:cache:bytes", self.prefix)
    }

    /// Pub/sub: cooldown changes, bindings and runtime versions as they happen.
    pub fn events(&self) -> String {
        format!("{}:events", self.prefix)
    }
}

/// When a window's counter may go: a day after the window ends (lifetime counters never).
pub fn expires_at(period: Period, now: UnixMs) -> Option<UnixMs> {
    period.window(now).1.map(|end| UnixMs(end.0 + 24 * 3_600_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_parts_apart_and_carry_the_window() {
        let keys = Keys::new("sy");
        let slot = SlotKey { source: SourceName::new("a"), model: "b:c".into() };
        assert_eq!(keys.slot_tokens(&slot, Period::Hour, UnixMs(3_600_000)), "sy:q:a\u{1f}b:c\u{1f}hour\u{1f}3600000");
        let key = crate::domain::KeyName::new("k");
        assert_eq!(
            keys.account(&Account::Tokens(key.clone()), Period::Hours(5), UnixMs(0)),
            "sy:k:k\u{1f}nhour:5\u{1f}0"
        );
        assert_eq!(keys.account(&Account::KeyUsd(key), Period::Day, UnixMs(0)), "sy:usd:k:k\u{1f}day\u{1f}0");
        let group = Account::GroupUsd(crate::domain::GroupName::new("k"));
        assert_eq!(keys.account(&group, Period::Day, UnixMs(0)), "sy:usd:g:k\u{1f}day\u{1f}0");
        assert_eq!(keys.rpm(&SourceName::new("a"), 17), "sy:rpm:a\u{1f}17");
        let other = SlotKey { source: SourceName::new("a\u{1f}b"), model: "c".into() };
        assert_ne!(keys.probe(&slot), keys.probe(&other));
        assert_eq!(expires_at(Period::Never, UnixMs(5)), None);
        assert_eq!(expires_at(Period::Hour, UnixMs(10)), Some(UnixMs(3_600_000 + 86_400_000)));
    }
}
