//! The unit the scheduler keeps health, scores, quotas and affinity for: one model of one source.

use super::names::SourceName;

/// One (source, model) pair: the unit that cools down, is scored and is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct SlotKey {
    pub source: SourceName,
    pub model: String,
}

impl std::fmt::Display for SlotKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.source, self.model)
    }
}
