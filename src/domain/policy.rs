//! The scheduler's policies as the config states them: cooldown backoff and probes, the smart
//! score's weights, session affinity, and how the candidates of one tier are ordered.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The numbers behind cooling (config `cooldown:`). Defaults follow the design; Keyway's
/// breaker is `failure_threshold: 3, ladder: [60s]`; Parrot's ladder is
/// `ladder: [1m, 3m, 5m, 10m, 15m, 0]` (0 = until cleared by a probe or an operator).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CooldownPolicy {
    /// First transient backoff; doubles per consecutive failure.
    pub transient_base_ms: u64,
    pub transient_cap_ms: u64,
    /// When set, transient failures walk this ladder instead of doubling (0 = indefinite).
    pub ladder_ms: Vec<u64>,
    /// Consecutive transient failures before the first window opens.
    pub failure_threshold: u32,
    pub auth_ms: u64,
    pub rate_limit_ms: u64,
    pub quota_cap_ms: u64,
    /// A cooling slot admits a probe this long after its window opened (or half the window,
    /// if sooner), and each failed probe opens a new window: a recovered source is back in
    /// use within about this long, whatever its backoff has grown to.
    pub probe_after_ms: u64,
}

impl Default for CooldownPolicy {
    fn default() -> Self {
        CooldownPolicy {
            transient_base_ms: 5_000,
            transient_cap_ms: 300_000,
            ladder_ms: Vec::new(),
            failure_threshold: 1,
            auth_ms: 600_000,
            rate_limit_ms: 30_000,
            quota_cap_ms: 1_800_000,
            probe_after_ms: 15_000,
        }
    }
}

impl CooldownPolicy {
    pub fn probe_after(&self) -> Duration {
        Duration::from_millis(self.probe_after_ms)
    }
}

/// Config `scoring:`; the defaults are Parrot's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScoringPolicy {
    pub ema_alpha: f64,
    /// Attempts the recent success rate is taken over.
    pub recent_window: u32,
    /// Score of an untried (or fully stale) slot, in ms-like units.
    pub default_score: f64,
    pub error_penalty_factor: f64,
    pub stale_minutes: f64,
    pub stale_full_decay_minutes: f64,
    /// Chance per request that the most worth-exploring candidate goes first.
    pub exploration_rate: f64,
}

impl Default for ScoringPolicy {
    fn default() -> Self {
        ScoringPolicy {
            ema_alpha: 0.25,
            recent_window: 50,
            default_score: 3000.0,
            error_penalty_factor: 8.0,
            stale_minutes: 15.0,
            stale_full_decay_minutes: 30.0,
            exploration_rate: 0.2,
        }
    }
}

/// Config `affinity:`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AffinityPolicy {
    pub enabled: bool,
    pub ttl_minutes: u64,
}

impl Default for AffinityPolicy {
    fn default() -> Self {
        AffinityPolicy { enabled: true, ttl_minutes: 30 }
    }
}

impl AffinityPolicy {
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_minutes.saturating_mul(60))
    }
}

/// How candidates of one tier are ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelSelection {
    /// By score: latency and recent success, with exploration.
    #[default]
    Smart,
    /// As configured.
    Order,
    /// By the `priority_orders` list for the model.
    Priority,
    /// The cheapest first (input plus output price; unpriced last), healthy before cooling.
    Cheapest,
}
