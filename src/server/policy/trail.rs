//! What policies did to one request, for its log rows: `NAME:HOOK:ACTION` entries, each
//! counted, bounded in number however many chunks a stream rewrites.

use std::sync::Mutex;

use super::Hook;
use crate::config::PolicyName;

/// Distinct entries kept; past them more decisions are counted in the metrics only.
const MAX_ENTRIES: usize = 16;

#[derive(Default, Debug)]
pub struct Trail(Mutex<Vec<Entry>>);

#[derive(Debug)]
struct Entry {
    policy: PolicyName,
    hook: Hook,
    action: &'static str,
    times: u32,
}

impl Trail {
    pub fn add(&self, policy: &PolicyName, hook: Hook, action: &'static str) {
        let mut entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match entries.iter().position(|e| &e.policy == policy && e.hook == hook && e.action == action) {
            Some(at) => entries[at].times = entries[at].times.saturating_add(1),
            None if entries.len() < MAX_ENTRIES => {
                entries.push(Entry { policy: policy.clone(), hook, action, times: 1 })
            }
            None => {}
        }
    }

    /// The log row's `policy`: `None` when no policy did anything but allow.
    pub fn summary(&self) -> Option<String> {
        let entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if entries.is_empty() {
            return None;
        }
        let parts: Vec<String> = entries
            .iter()
            .map(|e| match e.times {
                1 => format!("{}:{}:{}", e.policy, e.hook.as_str(), e.action),
                n => format!("{}:{}:{}x{n}", e.policy, e.hook.as_str(), e.action),
            })
            .collect();
        Some(parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_counted_and_bounded() {
        let trail = Trail::default();
        assert_eq!(trail.summary(), None, "nothing but allows: no entry");
        let pii = PolicyName::new("pii");
        trail.add(&pii, Hook::Request, "rewrite");
        trail.add(&pii, Hook::Stream, "rewrite");
        trail.add(&pii, Hook::Stream, "rewrite");
        assert_eq!(trail.summary().unwrap(), "pii:request:rewrite, pii:stream:rewritex2");
        for n in 0..100 {
            trail.add(&PolicyName::new(format!("p{n}")), Hook::Answer, "deny");
        }
        assert_eq!(trail.summary().unwrap().split(", ").count(), MAX_ENTRIES);
    }
}
