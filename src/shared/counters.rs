//! This replica's own part of each shared counter (tokens per quota window, requests per rpm
//! second), as an absolute total. Each counter is a Redis hash with one field per replica, so
//! sending a total again (a retried sync, a restart that seeds it from SQLite) never counts it
//! twice, and the others' part is the sum of the other fields.

use std::collections::HashMap;

use crate::domain::UnixMs;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Part {
    total: u64,
    /// Changed since it was last sent.
    dirty: bool,
    expire_at: Option<UnixMs>,
}

/// One total to send: the counter's name, this replica's total, when the counter may expire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Total {
    pub key: String,
    pub total: u64,
    pub expire_at: Option<UnixMs>,
}

#[derive(Debug, Default)]
pub struct Counters {
    parts: HashMap<String, Part>,
}

impl Counters {
    /// Counts `by` more of this replica's into `key`.
    pub fn add(&mut self, key: String, by: u64, expire_at: Option<UnixMs>) {
        let part = self.parts.entry(key).or_insert(Part { total: 0, dirty: true, expire_at });
        part.total = part.total.saturating_add(by);
        part.dirty = true;
        part.expire_at = expire_at;
    }

    /// This replica's total in `key` is `total` (a quota window's usage as its scheduler keeps it).
    pub fn set(&mut self, key: String, total: u64, expire_at: Option<UnixMs>) {
        let part = self.parts.entry(key).or_insert(Part { total, dirty: true, expire_at });
        part.dirty |= part.total != total;
        part.total = total;
        part.expire_at = expire_at;
    }

    /// Every changed total, now counted as sent; [`Counters::resend`] marks them again when
    /// sending failed.
    pub fn take_dirty(&mut self) -> Vec<Total> {
        let mut out = Vec::new();
        for (key, part) in self.parts.iter_mut().filter(|(_, p)| p.dirty) {
            out.push(Total { key: key.clone(), total: part.total, expire_at: part.expire_at });
            part.dirty = false;
        }
        out
    }

    pub fn resend(&mut self, totals: &[Total]) {
        for sent in totals {
            if let Some(part) = self.parts.get_mut(&sent.key) {
                part.dirty = true;
            }
        }
    }

    /// Forgets counters past their expiry (their Redis hash expires then too).
    pub fn prune(&mut self, now: UnixMs) {
        self.parts.retain(|_, p| p.expire_at.is_none_or(|at| at > now));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.parts.len()
    }
}

/// The other replicas' part of a counter: every field of its hash but `me`'s, ignoring any
/// value that is not a number.
pub fn others(fields: &HashMap<String, String>, me: &str) -> u64 {
    fields
        .iter()
        .filter(|(replica, _)| replica.as_str() != me)
        .filter_map(|(_, total)| total.parse::<u64>().ok())
        .fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_are_sent_when_changed_and_again_after_a_failed_send() {
        let mut c = Counters::default();
        c.set("q".into(), 100, None);
        c.add("r".into(), 1, None);
        c.add("r".into(), 1, None);
        let mut sent = c.take_dirty();
        sent.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(
            sent,
            vec![
                Total { key: "q".into(), total: 100, expire_at: None },
                Total { key: "r".into(), total: 2, expire_at: None }
            ]
        );
        assert!(c.take_dirty().is_empty(), "nothing changed since");
        c.set("q".into(), 100, None);
        assert!(c.take_dirty().is_empty(), "the same total is not sent again");
        c.set("q".into(), 130, None);
        let sent = c.take_dirty();
        c.resend(&sent);
        assert_eq!(
            c.take_dirty(),
            vec![Total { key: "q".into(), total: 130, expire_at: None }],
            "a failed send is retried whole"
        );
    }

    #[test]
    fn expired_counters_are_forgotten_even_unsent() {
        let mut c = Counters::default();
        c.add("old".into(), 1, Some(UnixMs(10)));
        c.add("new".into(), 1, Some(UnixMs(30)));
        c.prune(UnixMs(20));
        assert_eq!(c.len(), 1);
        assert_eq!(c.take_dirty()[0].key, "new");
    }

    #[test]
    fn the_others_part_sums_every_other_replica_and_skips_junk() {
        let fields: HashMap<String, String> = [("a", "10"), ("b", "32"), ("c", "junk"), ("d", "18446744073709551615")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(others(&fields, "a"), u64::MAX, "saturates");
        let fields: HashMap<String, String> =
            [("a", "10"), ("b", "32")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(others(&fields, "a"), 32);
        assert_eq!(others(&fields, "z"), 42);
    }
}
