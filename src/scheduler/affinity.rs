//! Session affinity: a conversation's next turn goes back to the slot that answered its last
//! one (warm prompt caches, consistent behaviour). Fingerprints are pure functions, so the
//! one written when an answer completes equals the one the next turn's request computes.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::domain::SlotKey;
use crate::domain::UnixMs;

/// sha256(key | client IP | message | message), 32 hex characters.
pub fn fingerprint(key_name: &str, client_ip: &str, pair: [&Value; 2]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(key_name.as_bytes());
    hasher.update(b"|");
    hasher.update(client_ip.as_bytes());
    for message in pair {
        hasher.update(b"|");
        hasher.update(canonical(message).to_string().as_bytes());
    }
    let digest = hasher.finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The pair a request is looked up by: the two messages before the current turn.
pub fn query_pair(messages: &[Value]) -> Option<[&Value; 2]> {
    let before = messages.len().checked_sub(1)?;
    (before >= 2).then(|| [&messages[before - 2], &messages[before - 1]])
}

/// A message reduced to what identifies it, whichever client or front door produced it:
/// role, text (string or text blocks), other blocks, tool calls and the tool-call id. Clients
/// echo assistant turns back with extra nulls or as blocks; those must not change the hash.
fn canonical(message: &Value) -> Value {
    let content = match &message["content"] {
        Value::Array(blocks) => {
            let mut text = String::new();
            let mut other = Vec::new();
            for block in blocks {
                match block["text"].as_str() {
                    Some(t) if block["type"] == "text" => text.push_str(t),
                    _ => other.push(block.clone()),
                }
            }
            if other.is_empty() { Value::String(text) } else { json!({"text": text, "blocks": other}) }
        }
        Value::Null => Value::String(String::new()),
        other => other.clone(),
    };
    let tool_calls: Vec<Value> = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!([c["id"], c["function"]["name"], c["function"]["arguments"]]))
        .collect();
    // serde_json's map is ordered by key, so this prints the same for equal messages.
    json!({"role": message["role"], "content": content, "tool_calls": tool_calls, "tool_call_id": message["tool_call_id"]})
}

/// Where a conversation was last served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub slot: SlotKey,
    pub last_used: UnixMs,
}

/// Fingerprint → binding, expiring `ttl` after last use.
#[derive(Debug, Default)]
pub struct AffinityTable {
    bindings: HashMap<String, Binding>,
}

impl AffinityTable {
    pub fn from_rows(rows: impl IntoIterator<Item = (String, Binding)>) -> Self {
        AffinityTable { bindings: rows.into_iter().collect() }
    }

    /// The live binding of `fingerprint`, if any; looking it up does not renew it.
    pub fn get(&self, fingerprint: &str, now: UnixMs, ttl: Duration) -> Option<&Binding> {
        self.bindings.get(fingerprint).filter(|b| now.since(b.last_used) < ttl)
    }

    pub fn bind(&mut self, fingerprint: String, slot: SlotKey, now: UnixMs) {
        self.bindings.insert(fingerprint, Binding { slot, last_used: now });
    }

    /// Drops expired bindings; returns how many.
    pub fn prune(&mut self, now: UnixMs, ttl: Duration) -> usize {
        let before = self.bindings.len();
        self.bindings.retain(|_, b| now.since(b.last_used) < ttl);
        before - self.bindings.len()
    }

    /// Drops every binding (or those to one source); returns how many.
    pub fn clear(&mut self, source: Option<&str>) -> usize {
        let before = self.bindings.len();
        self.bindings.retain(|_, b| source.is_some_and(|s| b.slot.source.as_str() != s));
        before - self.bindings.len()
    }

    pub fn len(&self) -> usize {
        self.bindings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SourceName;

    fn slot(s: &str) -> SlotKey {
        SlotKey { source: SourceName::new(s), model: "m".into() }
    }

    #[test]
    fn the_fingerprint_written_after_turn_n_is_the_one_turn_n_plus_1_looks_up() {
        let turn1 = vec![json!({"role": "system", "content": "be brief"}), json!({"role": "user", "content": "hi"})];
        assert_eq!(query_pair(&turn1).map(|_| ()), None, "one message before the turn: nothing to look up");
        let answer = json!({"role": "assistant", "content": "Hello! How can I help?"});
        let written = fingerprint("alice", "10.0.0.1", [turn1.last().unwrap(), &answer]);
        assert_eq!(written.len(), 32);

        // The client sends the answer back as blocks with extra null fields: same conversation.
        let mut turn2 = turn1.clone();
        turn2.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Hello! How can I help?"}], "refusal": null}));
        turn2.push(json!({"role": "user", "content": "tell me a joke"}));
        let queried = fingerprint("alice", "10.0.0.1", query_pair(&turn2).unwrap());
        assert_eq!(queried, written);

        assert_ne!(fingerprint("bob", "10.0.0.1", query_pair(&turn2).unwrap()), written, "keys separate sessions");
        assert_ne!(fingerprint("alice", "10.0.0.2", query_pair(&turn2).unwrap()), written, "so do client IPs");
        let mut other = turn2.clone();
        other[2] = json!({"role": "assistant", "content": "Hi."});
        assert_ne!(fingerprint("alice", "10.0.0.1", query_pair(&other).unwrap()), written);
    }

    #[test]
    fn tool_calls_are_part_of_the_fingerprint() {
        let user = json!({"role": "user", "content": "weather?"});
        let call = |args: &str| json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": args}}]});
        let a = fingerprint("k", "ip", [&user, &call("{\"city\":\"Paris\"}")]);
        assert_eq!(a, fingerprint("k", "ip", [&user, &call("{\"city\":\"Paris\"}")]));
        assert_ne!(a, fingerprint("k", "ip", [&user, &call("{\"city\":\"Rome\"}")]));
    }

    #[test]
    fn bindings_expire_after_the_ttl_and_clear_by_source() {
        let ttl = Duration::from_secs(1800);
        let mut table = AffinityTable::default();
        table.bind("f1".into(), slot("a"), UnixMs(0));
        table.bind("f2".into(), slot("b"), UnixMs(1_000_000));
        assert_eq!(table.get("f1", UnixMs(1_799_999), ttl).unwrap().slot, slot("a"));
        assert!(table.get("f1", UnixMs(1_800_000), ttl).is_none(), "30 minutes after last use");
        assert_eq!(table.prune(UnixMs(1_800_000), ttl), 1);
        table.bind("f3".into(), slot("a"), UnixMs(1_000_000));
        assert_eq!(table.clear(Some("a")), 1);
        assert_eq!(table.len(), 1);
        assert_eq!(table.clear(None), 1);
        assert!(table.is_empty());
    }
}
