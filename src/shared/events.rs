//! What replicas tell each other as it happens (Redis pub/sub): a slot's health changed, a
//! conversation was bound to a slot, a new runtime file is in Redis. Read defensively: an
//! event is bounded in size and a malformed one is dropped.

use serde::{Deserialize, Serialize};

use crate::domain::{SlotKey, UnixMs};
use crate::scheduler::SlotHealth;

/// Largest event read.
pub(super) const MAX_EVENT_BYTES: usize = 64 << 10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The replica it came from.
    pub from: String,
    #[serde(flatten)]
    pub what: What,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum What {
    /// `None`: healthy again.
    Health {
        slot: SlotKey,
        health: Option<SlotHealth>,
    },
    Bind {
        fingerprint: String,
        slot: SlotKey,
        at: UnixMs,
    },
    Runtime {
        version: u64,
    },
    /// An adapter uploaded through one replica: its bytes are in Redis under its name.
    Adapter {
        name: String,
        sha256: String,
    },
    AdapterRemoved {
        name: String,
    },
    /// An audit entry written on the replica it came from.
    Audit {
        entry: Box<crate::access::AuditEntry>,
    },
}

impl Event {
    pub fn read(payload: &[u8]) -> Option<Event> {
        if payload.len() > MAX_EVENT_BYTES {
            return None;
        }
        serde_json::from_slice(payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SourceName;

    #[test]
    fn events_round_trip_and_bad_ones_are_dropped() {
        let slot = SlotKey { source: SourceName::new("a"), model: "m".into() };
        let event = Event { from: "r1".into(), what: What::Bind { fingerprint: "fp".into(), slot, at: UnixMs(5) } };
        let text = serde_json::to_vec(&event).unwrap();
        assert_eq!(Event::read(&text), Some(event));
        // What the Lua script that stores a runtime file publishes.
        let runtime = Event::read(br#"{"from":"r2","runtime":{"version":7}}"#).unwrap();
        assert_eq!(runtime.what, What::Runtime { version: 7 });
        assert_eq!(Event::read(b"{\"from\":1}"), None);
        assert_eq!(Event::read(&vec![b' '; MAX_EVENT_BYTES + 1]), None);
    }
}
