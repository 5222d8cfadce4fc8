//! This replica's part of each shared counter (tokens per quota window, requests per rpm
//! second): what it added and has not sent yet, and what it sent. A total read back from Redis
//! minus what this replica sent is the others' part, which its scheduler adds to its own.

use std::collections::HashMap;

use crate::domain::UnixMs;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Part {
    pending: u64,
    sent: u64,
    expire_at: Option<UnixMs>,
}

/// One increment to send: the counter's name, the amount, when the counter may expire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Increment {
    pub key: String,
    pub by: u64,
    pub expire_at: Option<UnixMs>,
}

#[derive(Debug, Default)]
pub struct Counters {
    parts: HashMap<String, Part>,
}

impl Counters {
    /// Counts `by` more of this replica's into `key`, to be sent.
    pub fn add(&mut self, key: String, by: u64, expire_at: Option<UnixMs>) {
        let part = self.parts.entry(key).or_default();
        part.pending = part.pending.saturating_add(by);
        part.expire_at = expire_at;
    }

    /// What this replica counted before it started (its own state file): already in Redis.
    pub fn seed(&mut self, key: String, sent: u64, expire_at: Option<UnixMs>) {
        let part = self.parts.entry(key).or_default();
        part.sent = part.sent.max(sent);
        part.expire_at = expire_at;
    }

    /// Every pending amount, now counted as sent; [`Counters::unsend`] puts them back when
    /// sending failed.
    pub fn take_pending(&mut self) -> Vec<Increment> {
        let mut out = Vec::new();
        for (key, part) in self.parts.iter_mut().filter(|(_, p)| p.pending > 0) {
            out.push(Increment { key: key.clone(), by: part.pending, expire_at: part.expire_at });
            part.sent = part.sent.saturating_add(part.pending);
            part.pending = 0;
        }
        out
    }

    pub fn unsend(&mut self, increments: Vec<Increment>) {
        for inc in increments {
            let part = self.parts.entry(inc.key).or_default();
            part.sent = part.sent.saturating_sub(inc.by);
            part.pending = part.pending.saturating_add(inc.by);
        }
    }

    /// The other replicas' part of `total`, a value of `key` read after this replica's sends.
    pub fn others(&self, key: &str, total: u64) -> u64 {
        total.saturating_sub(self.parts.get(key).map_or(0, |p| p.sent))
    }

    /// Forgets counters past their expiry.
    pub fn prune(&mut self, now: UnixMs) {
        self.parts.retain(|_, p| p.expire_at.is_none_or(|at| at > now) || p.pending > 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn others_are_the_total_less_what_this_replica_sent() {
        let mut c = Counters::default();
        c.seed("k".into(), 100, None);
        c.add("k".into(), 10, None);
        assert_eq!(c.others("k", 150), 50, "unsent tokens are not in the total yet");
        let sent = c.take_pending();
        assert_eq!(sent, vec![Increment { key: "k".into(), by: 10, expire_at: None }]);
        assert_eq!(c.others("k", 175), 65);
        c.unsend(sent);
        assert_eq!(c.others("k", 165), 65, "a failed send is pending again");
        assert_eq!(c.take_pending().len(), 1);
        assert!(c.take_pending().is_empty());
        assert_eq!(c.others("unknown", 7), 7);
    }

    #[test]
    fn expired_counters_are_forgotten_unless_still_pending() {
        let mut c = Counters::default();
        c.add("old".into(), 1, Some(UnixMs(10)));
        c.seed("gone".into(), 5, Some(UnixMs(10)));
        c.prune(UnixMs(20));
        assert_eq!((c.others("gone", 5), c.take_pending().len()), (5, 1));
        c.prune(UnixMs(20));
        assert_eq!(c.others("old", 3), 3);
    }
}
