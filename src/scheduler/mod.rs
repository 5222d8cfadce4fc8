//! The scheduler: which candidate (source, model) goes first, which rest, and what every
//! attempt's outcome does to a slot's health. Health lives in memory; changes are written to
//! SQLite off the request path, so cooldowns survive restarts.

mod clock;
mod cooldown;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use clock::{Clock, ManualClock, SystemClock, UnixMs};
pub use cooldown::{Admission, CooldownPolicy, Failure, SlotHealth, Window, probe_budget};

use crate::config::SourceName;
use crate::plugin::ErrorKind;
use crate::provider::AttemptError;
use crate::router::Resolved;
use crate::state::StateStore;

/// One (source, model) pair: the unit that cools down.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotKey {
    pub source: SourceName,
    pub model: String,
}

impl SlotKey {
    pub fn of(r: &Resolved<'_>) -> SlotKey {
        SlotKey { source: r.source.name.clone(), model: r.model.name.clone() }
    }
}

impl std::fmt::Display for SlotKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.source, self.model)
    }
}

/// A candidate the scheduler lets through; `probe` ones are testing a cooling slot.
pub struct Candidate<'a> {
    pub resolved: Resolved<'a>,
    pub probe: bool,
}

/// A candidate left out, and why (for the all-failed summary).
pub struct Skipped {
    pub key: SlotKey,
    pub until: Option<UnixMs>,
}

/// What an attempt's error means for the slot: `None` = the request itself was wrong (it goes
/// back to the client, nothing cools, nothing else is tried).
pub fn classify(error: &AttemptError) -> Option<Failure> {
    match error {
        AttemptError::Upstream { kind, retry_after, .. } => match kind {
            ErrorKind::BadRequest | ErrorKind::NotFound | ErrorKind::ContentPolicy | ErrorKind::Unsupported => None,
            ErrorKind::Auth | ErrorKind::Permission => Some(Failure::Auth),
            ErrorKind::RateLimit => Some(Failure::RateLimited { retry_after: *retry_after }),
            ErrorKind::Quota => Some(Failure::QuotaExhausted { window_ends_in: None }),
            ErrorKind::Overloaded | ErrorKind::Server | ErrorKind::InvalidResponse | ErrorKind::Truncated => {
                Some(Failure::Transient)
            }
        },
        AttemptError::Sandbox(_)
        | AttemptError::BadAdapterOutput { .. }
        | AttemptError::Transport { .. }
        | AttemptError::Timeout { .. } => Some(Failure::Transient),
    }
}

pub struct Scheduler {
    policy: CooldownPolicy,
    clock: Arc<dyn Clock>,
    slots: Mutex<HashMap<SlotKey, SlotHealth>>,
    store: Option<StateStore>,
}

impl Scheduler {
    pub fn new(policy: CooldownPolicy, clock: Arc<dyn Clock>, store: Option<StateStore>) -> Scheduler {
        let slots = store.as_ref().map(StateStore::load_cooldowns).unwrap_or_default();
        Scheduler { policy, clock, slots: Mutex::new(slots), store }
    }

    pub fn now(&self) -> UnixMs {
        self.clock.now()
    }

    /// Healthy candidates in config order, then probes of cooling ones (each takes a probe
    /// slot until its outcome is recorded); closed ones are skipped.
    pub fn order<'a>(&self, candidates: Vec<Resolved<'a>>) -> (Vec<Candidate<'a>>, Vec<Skipped>) {
        let now = self.clock.now();
        let mut slots = self.slots.lock().expect("scheduler lock");
        let (mut healthy, mut probes, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
        for resolved in candidates {
            let key = SlotKey::of(&resolved);
            let health = slots.get(&key);
            match health.map_or(Admission::Healthy, |h| h.admission(now, resolved.source.max_concurrent)) {
                Admission::Healthy => healthy.push(Candidate { resolved, probe: false }),
                Admission::Probe => {
                    slots.get_mut(&key).expect("probing a known slot").probes_in_flight += 1;
                    probes.push(Candidate { resolved, probe: true });
                }
                Admission::Closed => {
                    skipped.push(Skipped { until: health.and_then(|h| h.window).and_then(|w| w.until), key })
                }
            }
        }
        healthy.extend(probes);
        (healthy, skipped)
    }

    /// Records an attempt's outcome: `None` = success (clears the slot), `Some` = a failure.
    pub fn record(&self, key: &SlotKey, probe: bool, failure: Option<Failure>) {
        let now = self.clock.now();
        let mut slots = self.slots.lock().expect("scheduler lock");
        let changed = match failure {
            None => slots.remove(key).is_some(),
            Some(failure) => {
                let health = slots.entry(key.clone()).or_default();
                health.on_failure(failure, now, &self.policy);
                true
            }
        };
        if probe && let Some(h) = slots.get_mut(key) {
            h.probes_in_flight = h.probes_in_flight.saturating_sub(1);
        }
        if changed && let Some(store) = &self.store {
            store.save_cooldown(key, slots.get(key));
        }
    }

    /// Gives back a probe slot whose attempt never reached the upstream's verdict.
    pub fn release_probe(&self, key: &SlotKey) {
        if let Some(h) = self.slots.lock().expect("scheduler lock").get_mut(key) {
            h.probes_in_flight = h.probes_in_flight.saturating_sub(1);
        }
    }

    /// A snapshot of every slot that is not plainly healthy.
    pub fn health(&self) -> Vec<(SlotKey, SlotHealth)> {
        let mut all: Vec<_> =
            self.slots.lock().expect("scheduler lock").iter().map(|(k, h)| (k.clone(), h.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Clears cooldowns (all, or those of one source and/or model); returns how many.
    pub fn clear(&self, source: Option<&str>, model: Option<&str>) -> usize {
        let mut slots = self.slots.lock().expect("scheduler lock");
        let cleared: Vec<SlotKey> = slots
            .keys()
            .filter(|k| source.is_none_or(|s| k.source.as_str() == s) && model.is_none_or(|m| k.model == m))
            .cloned()
            .collect();
        for key in &cleared {
            slots.remove(key);
            if let Some(store) = &self.store {
                store.save_cooldown(key, None);
            }
        }
        cleared.len()
    }

    /// Waits until every health change so far is on disk.
    pub fn flush(&self) {
        if let Some(store) = &self.store {
            store.flush();
        }
    }
}
