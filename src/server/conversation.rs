//! The conversation a chat request continues, for session affinity: the fingerprint of the
//! turn before (looked up before routing) and the current turn (bound to the answer's slot).

use serde_json::Value;

use super::call::Call;
use crate::config::{KeyName, ModelKind};
use crate::scheduler;

/// The conversation a chat request continues: looked up before, bound after.
pub struct Conversation {
    /// Fingerprint of the two messages before the current turn.
    pub query: Option<String>,
    /// The current turn, paired with the answer to bind the next turn.
    pub last: Option<Value>,
}

impl Conversation {
    /// Nothing to look up or bind when affinity is off, or for other endpoints: the request
    /// is then not parsed again.
    pub fn of(key: &KeyName, call: &Call<'_>, affinity: bool) -> Conversation {
        if !affinity || call.kind != ModelKind::Chat {
            return Conversation { query: None, last: None };
        }
        #[derive(serde::Deserialize)]
        struct Messages {
            #[serde(default)]
            messages: Vec<Value>,
        }
        let messages = serde_json::from_str::<Messages>(call.body.text()).map(|m| m.messages).unwrap_or_default();
        let ip = call.client_ip.to_string();
        let query = scheduler::query_pair(&messages).map(|pair| scheduler::fingerprint(key.as_str(), &ip, pair));
        Conversation { query, last: messages.last().cloned() }
    }
}
