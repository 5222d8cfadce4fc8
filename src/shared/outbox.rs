//! Replicas' outbox: this replica's own changes as the scheduler's store hands them over
//! (the `Persist` tee), kept between syncs as counters and events to send.

use std::sync::Arc;

use super::events::What;
use super::{Shared, keys};
use crate::domain::SlotKey;
use crate::scheduler::{Loaded, Persist, StateChange};

/// Most own changes carried from one sync to the next while Redis is away.
const MAX_OUTBOX: usize = 10_000;

impl Shared {
    /// This replica's changes as the scheduler hands them over (see [`Tee`]).
    fn record(&self, changes: &[StateChange]) {
        let mut own = self.own();
        let own = &mut *own;
        let mut events = Vec::new();
        for change in changes {
            match change {
                StateChange::Cooldown(slot, health) => {
                    events.push(What::Health { slot: slot.clone(), health: health.clone() })
                }
                StateChange::Bind(fingerprint, slot, at) => {
                    events.push(What::Bind { fingerprint: fingerprint.clone(), slot: slot.clone(), at: *at })
                }
                StateChange::Usage(quota, usage) => {
                    let key = self.keys.slot_tokens(&quota.slot, quota.period, usage.window_start);
                    own.counters.set(key, usage.tokens, keys::expires_at(quota.period, usage.window_start));
                }
                StateChange::KeyUsage(name, period, usage) => {
                    let key = self.keys.account(name, *period, usage.window_start);
                    own.counters.set(key, usage.tokens, keys::expires_at(*period, usage.window_start));
                }
                // Scores stay per replica; clearing bindings is an operator's local act.
                StateChange::Stats(..) | StateChange::ClearBindings(_) | StateChange::PruneBindings(_) => {}
            }
        }
        if !events.is_empty() {
            own.outbox = merge_outbox(std::mem::take(&mut own.outbox), events);
        }
    }

    /// What the store held at start: this replica's own usage, sent as its totals.
    fn seed(&self, loaded: &Loaded) {
        let mut own = self.own();
        for (quota, usage) in &loaded.usage {
            let key = self.keys.slot_tokens(&quota.slot, quota.period, usage.window_start);
            own.counters.set(key, usage.tokens, keys::expires_at(quota.period, usage.window_start));
        }
        for ((name, period), usage) in &loaded.key_usage {
            let key = self.keys.account(name, *period, usage.window_start);
            own.counters.set(key, usage.tokens, keys::expires_at(*period, usage.window_start));
        }
    }
}

/// `earlier` then `later`, keeping only the newest health of each slot (what the others need is
/// where a slot stands, not its history) and, past `MAX_OUTBOX`, dropping the oldest bindings
/// first: a lost binding costs a cache miss, a lost heal would keep a source skipped.
pub(super) fn merge_outbox(earlier: Vec<What>, later: Vec<What>) -> Vec<What> {
    let mut all: Vec<What> = earlier.into_iter().chain(later).collect();
    let mut seen: Vec<&SlotKey> = Vec::new();
    let mut keep = vec![true; all.len()];
    for (i, what) in all.iter().enumerate().rev() {
        if let What::Health { slot, .. } = what {
            if seen.contains(&slot) {
                keep[i] = false;
            } else {
                seen.push(slot);
            }
        }
    }
    let mut flags = keep.into_iter();
    all.retain(|_| flags.next().unwrap_or(false));
    let mut excess = all.len().saturating_sub(MAX_OUTBOX);
    all.retain(|w| {
        let drop = excess > 0 && matches!(w, What::Bind { .. });
        excess -= usize::from(drop);
        !drop
    });
    all.truncate(MAX_OUTBOX);
    all
}

/// The scheduler's store, with every change also recorded for the other replicas.
pub(super) struct Tee {
    pub(super) store: Arc<dyn Persist>,
    pub(super) shared: Arc<Shared>,
}

impl Persist for Tee {
    fn take_loaded(&self) -> Loaded {
        let loaded = self.store.take_loaded();
        self.shared.seed(&loaded);
        loaded
    }

    fn keep(&self, changes: Vec<StateChange>) {
        self.shared.record(&changes);
        self.store.keep(changes);
    }

    fn flush(&self) {
        self.store.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SourceName, UnixMs};

    #[test]
    fn the_outbox_keeps_each_slots_newest_health_and_drops_bindings_first() {
        let slot = |name: &str| SlotKey { source: SourceName::new(name), model: "m".into() };
        let bind = |n: u64| What::Bind { fingerprint: format!("f{n}"), slot: slot("a"), at: UnixMs(n) };
        let earlier = vec![What::Health { slot: slot("a"), health: None }, bind(1)];
        let later =
            vec![What::Health { slot: slot("b"), health: None }, What::Health { slot: slot("a"), health: None }];
        let merged = merge_outbox(earlier, later);
        assert_eq!(merged.len(), 3, "{merged:?}");
        assert_eq!(merged[0], bind(1));
        let mut many: Vec<What> = (0..MAX_OUTBOX as u64).map(bind).collect();
        many.push(What::Health { slot: slot("a"), health: None });
        let merged = merge_outbox(many, vec![What::Health { slot: slot("b"), health: None }]);
        assert_eq!(merged.len(), MAX_OUTBOX);
        assert!(
            matches!(merged[MAX_OUTBOX - 1], What::Health { .. })
                && matches!(merged[MAX_OUTBOX - 2], What::Health { .. })
        );
        assert_eq!(merged[0], bind(2), "the oldest bindings went first");
    }
}
