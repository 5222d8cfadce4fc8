//! The runtime file (`runtime_file`, edited by the WebUI): the AUTO chains, `auto` for chat
//! and `auto_image` for images, as slots `{model, source, tier, token_quota, period, hours}`.

use serde::Deserialize;

use super::SourceName;
use crate::scheduler::{PeriodName, Quota};

/// One slot as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotConfig {
    pub model: String,
    /// Unset: every source serving `model`, in config order.
    #[serde(default)]
    pub source: Option<SourceName>,
    /// Lower tiers are tried first; slots of one tier are ordered by `channel_selection`.
    #[serde(default = "default_tier")]
    pub tier: u32,
    /// Tokens this slot may use per `period`; unset or 0 = unlimited.
    #[serde(default)]
    pub token_quota: Option<u64>,
    #[serde(default)]
    pub period: PeriodName,
    /// For `period: nhour`.
    #[serde(default)]
    pub hours: Option<u32>,
}

fn default_tier() -> u32 {
    1
}

/// A validated slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSlot {
    pub model: String,
    pub source: Option<SourceName>,
    pub tier: u32,
    pub quota: Option<Quota>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AutoChains {
    pub chat: Vec<ChainSlot>,
    pub image: Option<Vec<ChainSlot>>,
}

impl AutoChains {
    /// Whether model `AUTO` can serve anything of this kind.
    pub fn is_empty(&self) -> bool {
        self.chat.is_empty()
    }
}
