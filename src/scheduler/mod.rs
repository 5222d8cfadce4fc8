//! The scheduler: which candidates (source, model) a request may try and in what order, and
//! what each attempt's outcome does to a slot's health, score, quota and affinity. All of it
//! lives in memory; changes go to SQLite off the request path, so a restart keeps them.

mod affinity;
mod cooldown;
mod persist;
mod rpm;
mod score;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

pub use affinity::{AffinityTable, Binding, fingerprint, query_pair};
pub use cooldown::{Admission, SlotHealth, Window, probe_budget};
pub use persist::{Loaded, Persist, StateChange};
pub use score::{Stats, score};

pub use crate::domain::{
    Account, AffinityPolicy, Clock, CooldownPolicy, Failure, ManualClock, Period, PeriodName, Quota, ScoringPolicy,
    SlotKey, SystemClock, UnixMs, Usage, Usd,
};

use crate::config::{ChannelSelection, Config, SourceName};
use crate::router::{Planned, Resolved};

/// Token use of one slot in one kind of period window.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct QuotaKey {
    pub slot: SlotKey,
    pub period: Period,
}

/// A candidate the plan lets through; `probe` ones test a cooling slot and must be admitted
/// with [`Scheduler::admit_probe`] right before their attempt.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub resolved: Resolved<'a>,
    pub tier: u32,
    pub quota: Option<Quota>,
    pub probe: bool,
    /// Its price (1M input + 1M output tokens), for `cheapest` ordering.
    pub price: Option<Usd>,
}

/// Why a candidate was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    Cooling { until: Option<UnixMs> },
    QuotaSpent { used: u64, quota: u64, resets: Option<UnixMs> },
}

#[derive(Debug, Clone)]
pub struct Skipped {
    pub key: SlotKey,
    pub tier: u32,
    pub reason: SkipReason,
}

/// The order a request tries its candidates in.
#[derive(Debug)]
pub struct Plan<'a> {
    pub candidates: Vec<Candidate<'a>>,
    pub skipped: Vec<Skipped>,
    /// The first candidate is there because the conversation was served by it before.
    pub affinity_hit: bool,
}

/// An account (a key's token quota or budget, a group's budget) has no room for another
/// call: what was used in its window, and what its calls in flight set aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpent {
    pub used: u64,
    pub reserved: u64,
}

/// One account of a call whose books close: what it set aside, and what it used (`None`:
/// nothing to count, e.g. a call that failed or has no price).
#[derive(Debug, Clone, Copy)]
pub struct KeySettled<'a> {
    pub account: &'a Account,
    pub period: Period,
    pub reserved: u64,
    pub used: Option<u64>,
}

/// The scheduler's settings, taken from the config.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub cooldown: CooldownPolicy,
    pub scoring: ScoringPolicy,
    pub affinity: AffinityPolicy,
    pub selection: ChannelSelection,
    pub priority_orders: BTreeMap<String, Vec<SourceName>>,
}

impl Policy {
    pub fn of(config: &Config) -> Policy {
        Policy {
            cooldown: config.settings.cooldown.clone(),
            scoring: config.settings.scoring.clone(),
            affinity: config.settings.affinity.clone(),
            selection: config.channel_selection,
            priority_orders: config.settings.priority_orders.clone(),
        }
    }
}

/// How long an answer took: to the response head, and from there to the first byte.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    pub connect_ms: f64,
    pub first_byte_ms: f64,
}

#[derive(Default)]
struct Inner {
    health: HashMap<SlotKey, SlotHealth>,
    stats: HashMap<SlotKey, Stats>,
    affinity: AffinityTable,
    usage: HashMap<QuotaKey, Usage>,
    key_usage: HashMap<(Account, Period), Usage>,
    /// What each account's calls in flight set aside (not persisted: they end with the process).
    key_reserved: HashMap<Account, u64>,
    rpm: HashMap<SourceName, rpm::RpmWindow>,
    binds_since_prune: u32,
    /// The other replicas' part of each quota window and rpm minute (`shared_state`), as the
    /// last sync read it; zero without replicas.
    others: Others,
}

#[derive(Default)]
struct Others {
    usage: HashMap<QuotaKey, Usage>,
    key_usage: HashMap<(Account, Period), Usage>,
    rpm: HashMap<SourceName, u32>,
}

impl Inner {
    /// Tokens a slot used in `period`'s current window, by every replica.
    fn slot_used(&self, quota: &QuotaKey, now: UnixMs) -> u64 {
        let own = self.usage.get(quota).map_or(0, |u| u.used(quota.period, now));
        own.saturating_add(self.others.usage.get(quota).map_or(0, |u| u.used(quota.period, now)))
    }

    /// What an account used in `period`'s current window, by every replica.
    fn key_used(&self, key: &Account, period: Period, now: UnixMs) -> u64 {
        let id = (key.clone(), period);
        let own = self.key_usage.get(&id).map_or(0, |u| u.used(period, now));
        own.saturating_add(self.others.key_usage.get(&id).map_or(0, |u| u.used(period, now)))
    }
}

pub struct Scheduler {
    policy: Policy,
    /// `policy.selection` as an operator last set it (the admin API changes it live).
    selection: std::sync::atomic::AtomicU8,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
    rng: Mutex<fastrand::Rng>,
    store: Option<Arc<dyn Persist>>,
    /// Taken before the state lock is given up and held while changes are handed to `store`:
    /// the store gets them in the order they were made, without the state lock held.
    persist_order: Mutex<()>,
}

impl Scheduler {
    pub fn new(policy: Policy, clock: Arc<dyn Clock>, store: Option<Arc<dyn Persist>>) -> Scheduler {
        let loaded = store.as_deref().map(Persist::take_loaded).unwrap_or_default();
        let Loaded { cooldowns, stats, bindings, usage, key_usage } = loaded;
        let affinity = AffinityTable::from_rows(bindings);
        let inner = Inner { health: cooldowns, stats, affinity, usage, key_usage, ..Inner::default() };
        let selection = std::sync::atomic::AtomicU8::new(policy.selection as u8);
        let rng = Mutex::new(fastrand::Rng::new());
        Scheduler { policy, selection, clock, inner: Mutex::new(inner), rng, store, persist_order: Mutex::new(()) }
    }

    /// A scheduler whose exploration rolls come from `seed` (tests).
    pub fn seeded(self, seed: u64) -> Scheduler {
        *self.rng.lock().expect("rng lock") = fastrand::Rng::with_seed(seed);
        self
    }

    pub fn now(&self) -> UnixMs {
        self.clock.now()
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// How tiers are ordered now.
    pub fn selection(&self) -> ChannelSelection {
        match self.selection.load(std::sync::atomic::Ordering::Relaxed) {
            x if x == ChannelSelection::Order as u8 => ChannelSelection::Order,
            x if x == ChannelSelection::Priority as u8 => ChannelSelection::Priority,
            x if x == ChannelSelection::Cheapest as u8 => ChannelSelection::Cheapest,
            _ => ChannelSelection::Smart,
        }
    }

    pub fn set_selection(&self, selection: ChannelSelection) {
        self.selection.store(selection as u8, std::sync::atomic::Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("scheduler lock")
    }

    /// Releases the state lock, then hands `changes` to the store (in the order they were
    /// made: see `persist_order`).
    fn keep(&self, inner: MutexGuard<'_, Inner>, changes: Vec<StateChange>) {
        let Some(store) = self.store.as_ref().filter(|_| !changes.is_empty()) else { return };
        let order = self.persist_order.lock().unwrap_or_else(|p| p.into_inner());
        drop(inner);
        store.keep(changes);
        drop(order);
    }

    /// Orders `planned` for a request for `model`: spent quotas and closed cooldowns are left
    /// out; tiers go in order; within a tier a due probe comes first, then the healthy
    /// candidates ordered by the channel selection; the candidate bound to `fingerprint` goes
    /// first when it is healthy.
    pub fn plan<'a>(&self, planned: Vec<Planned<'a>>, model: &str, fingerprint: Option<&str>) -> Plan<'a> {
        let now = self.clock.now();
        let roll = self.rng.lock().expect("rng lock").f64();
        let inner = self.lock();
        let mut tiers: BTreeMap<u32, (Vec<Candidate<'a>>, Vec<Candidate<'a>>)> = BTreeMap::new();
        let mut skipped = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for p in planned {
            let key = SlotKey::of(&p.resolved);
            if seen.contains(&key) {
                continue;
            }
            if let Some(quota) = p.quota {
                let used = inner.slot_used(&QuotaKey { slot: key.clone(), period: quota.period }, now);
                if used >= quota.tokens {
                    let resets = quota.period.window(now).1;
                    skipped.push(Skipped {
                        key,
                        tier: p.tier,
                        reason: SkipReason::QuotaSpent { used, quota: quota.tokens, resets },
                    });
                    continue;
                }
            }
            let health = inner.health.get(&key);
            let candidate =
                Candidate { resolved: p.resolved, tier: p.tier, quota: p.quota, probe: false, price: p.price };
            let (healthy, probes) = tiers.entry(p.tier).or_default();
            let probe_after = self.policy.cooldown.probe_after();
            match health.map_or(Admission::Healthy, |h| h.admission(now, p.resolved.source.max_concurrent, probe_after))
            {
                Admission::Healthy => healthy.push(candidate),
                Admission::Probe => probes.push(Candidate { probe: true, ..candidate }),
                Admission::Closed => {
                    let until = health.and_then(|h| h.window).and_then(|w| w.until);
                    skipped.push(Skipped { key: key.clone(), tier: p.tier, reason: SkipReason::Cooling { until } });
                }
            }
            seen.insert(key);
        }
        let mut candidates = Vec::new();
        // A due probe leads its tier: behind healthy candidates it would never run while they
        // serve, and a recovered source would wait out its whole backoff. A failed probe opens
        // a new window, so a slot leads at most once per `probe_after`.
        for (_, (mut healthy, probes)) in tiers {
            self.order_tier(&mut healthy, &inner, model, roll, now);
            candidates.extend(probes);
            candidates.extend(healthy);
        }
        let mut affinity_hit = false;
        if let Some(fp) = fingerprint.filter(|_| self.policy.affinity.enabled)
            && let Some(bound) = inner.affinity.get(fp, now, self.policy.affinity.ttl())
            && let Some(at) = candidates.iter().position(|c| !c.probe && SlotKey::of(&c.resolved) == bound.slot)
        {
            let chosen = candidates.remove(at);
            candidates.insert(0, chosen);
            affinity_hit = true;
        }
        Plan { candidates, skipped, affinity_hit }
    }

    fn order_tier(&self, tier: &mut Vec<Candidate<'_>>, inner: &Inner, model: &str, roll: f64, now: UnixMs) {
        match self.selection() {
            ChannelSelection::Order => {}
            ChannelSelection::Smart => score::order_by_score(
                tier,
                |c| inner.stats.get(&SlotKey::of(&c.resolved)).cloned(),
                roll,
                now,
                &self.policy.scoring,
            ),
            // Unpriced candidates last: what costs an unknown amount is not the cheap choice.
            ChannelSelection::Cheapest => tier.sort_by_key(|c| c.price.map_or((1, Usd::ZERO), |p| (0, p))),
            ChannelSelection::Priority => {
                let orders = &self.policy.priority_orders;
                if let Some(list) = orders.get(model).or_else(|| orders.get("*")) {
                    tier.sort_by_key(|c| list.iter().position(|s| *s == c.resolved.source.name).unwrap_or(usize::MAX));
                }
            }
        }
    }

    /// Takes a probe place for a cooling slot right before its attempt; false when the slot
    /// no longer admits one (another request took the last place, or it healed or reopened).
    pub fn admit_probe(&self, key: &SlotKey, max_concurrent: u32) -> bool {
        let now = self.clock.now();
        let mut inner = self.lock();
        match inner.health.get_mut(key) {
            None => true,
            Some(h) => match h.admission(now, max_concurrent, self.policy.cooldown.probe_after()) {
                Admission::Probe => {
                    h.probes_in_flight += 1;
                    true
                }
                Admission::Healthy => true,
                Admission::Closed => false,
            },
        }
    }

    /// Counts a request against the source's `rpm`; `Err` with the time a place frees up.
    pub fn take_rpm(&self, source: &SourceName, limit: u32) -> Result<(), Option<UnixMs>> {
        let now = self.clock.now();
        let mut inner = self.lock();
        let others = inner.others.rpm.get(source).copied().unwrap_or(0);
        let window = inner.rpm.entry(source.clone()).or_default();
        if window.try_take(now, limit.saturating_sub(others)) { Ok(()) } else { Err(window.free_at()) }
    }

    /// A served attempt: clears the slot's cooldown and feeds its score.
    pub fn record_success(&self, key: &SlotKey, timing: Timing) {
        let now = self.clock.now();
        let mut inner = self.lock();
        let healed = inner.health.remove(key).is_some();
        let stats = inner.stats.entry(key.clone()).or_default();
        stats.record_success(timing.connect_ms, timing.first_byte_ms, now, &self.policy.scoring);
        let mut changes = vec![StateChange::Stats(key.clone(), Some(stats.clone()))];
        if healed {
            changes.push(StateChange::Cooldown(key.clone(), None));
        }
        self.keep(inner, changes);
    }

    /// A failed attempt: cools the slot by the failure's rule and lowers its score.
    /// (A failed probe's place is freed with the new window it opens.)
    pub fn record_failure(&self, key: &SlotKey, failure: Failure) {
        let now = self.clock.now();
        let mut inner = self.lock();
        let health = inner.health.entry(key.clone()).or_default();
        health.on_failure(failure, now, &self.policy.cooldown);
        let health = health.clone();
        let stats = inner.stats.entry(key.clone()).or_default();
        stats.record_failure(None, now, &self.policy.scoring);
        let changes = vec![
            StateChange::Cooldown(key.clone(), Some(health)),
            StateChange::Stats(key.clone(), Some(stats.clone())),
        ];
        self.keep(inner, changes);
    }

    /// Gives back a probe place whose attempt never reached the upstream's verdict.
    pub fn release_probe(&self, key: &SlotKey) {
        if let Some(h) = self.lock().health.get_mut(key) {
            h.probes_in_flight = h.probes_in_flight.saturating_sub(1);
        }
    }

    /// An answer that reached its end: counts its tokens in every quota window the slot is
    /// measured in, and binds the conversation's next turn (`fingerprint`) to the slot.
    pub fn completed(&self, key: &SlotKey, tokens: u64, periods: &[Period], fingerprint: Option<String>) {
        let now = self.clock.now();
        let mut inner = self.lock();
        let mut changes = Vec::new();
        for period in periods {
            let quota_key = QuotaKey { slot: key.clone(), period: *period };
            let usage = inner.usage.entry(quota_key.clone()).or_default();
            usage.add(*period, now, tokens);
            changes.push(StateChange::Usage(quota_key, *usage));
        }
        if let Some(fp) = fingerprint.filter(|_| self.policy.affinity.enabled) {
            inner.affinity.bind(fp.clone(), key.clone(), now);
            changes.push(StateChange::Bind(fp, key.clone(), now));
            inner.binds_since_prune += 1;
            if inner.binds_since_prune >= 1024 {
                inner.binds_since_prune = 0;
                let ttl = self.policy.affinity.ttl();
                inner.affinity.prune(now, ttl);
                changes.push(StateChange::PruneBindings(UnixMs(now.0.saturating_sub(ttl.as_millis() as u64))));
            }
        }
        self.keep(inner, changes);
    }

    /// What account `key` has used in the current `period` window (tokens, or pico-dollars).
    pub fn key_used(&self, key: &Account, period: Period) -> u64 {
        let now = self.clock.now();
        self.lock().key_used(key, period, now)
    }

    /// Admits another call charged to `key` when what it used plus what its calls in flight
    /// set aside stay under `limit` per `period`, and sets `amount` aside for it. An account
    /// can so overrun its limit by at most one call's worth, however many run at once.
    pub fn reserve_key(&self, key: &Account, period: Period, limit: u64, amount: u64) -> Result<(), KeySpent> {
        let now = self.clock.now();
        let mut inner = self.lock();
        let used = inner.key_used(key, period, now);
        let reserved = inner.key_reserved.entry(key.clone()).or_default();
        if used.saturating_add(*reserved) >= limit {
            return Err(KeySpent { used, reserved: *reserved });
        }
        *reserved = reserved.saturating_add(amount);
        Ok(())
    }

    /// Closes what calls set aside with [`Scheduler::reserve_key`], in one pass: each
    /// account gets its set-aside amount back and, when the call was counted, what it used.
    pub fn settle_keys(&self, settled: &[KeySettled<'_>]) {
        if settled.is_empty() {
            return;
        }
        let now = self.clock.now();
        let mut inner = self.lock();
        let mut changes = Vec::new();
        for s in settled {
            if let Some(reserved) = inner.key_reserved.get_mut(s.account) {
                *reserved = reserved.saturating_sub(s.reserved);
                if *reserved == 0 {
                    inner.key_reserved.remove(s.account);
                }
            }
            let Some(used) = s.used else { continue };
            let usage = inner.key_usage.entry((s.account.clone(), s.period)).or_default();
            usage.add(s.period, now, used);
            changes.push(StateChange::KeyUsage(s.account.clone(), s.period, *usage));
        }
        self.keep(inner, changes);
    }

    /// Counts `tokens` (or pico-dollars) against account `key`'s `period` window.
    pub fn add_key_usage(&self, key: &Account, period: Period, tokens: u64) {
        self.settle_keys(&[KeySettled { account: key, period, reserved: 0, used: Some(tokens) }]);
    }

    /// When `period`'s current window ends.
    pub fn window_end(&self, period: Period) -> Option<UnixMs> {
        period.window(self.clock.now()).1
    }

    /// Tokens `key` has used in `quota`'s current window.
    pub fn quota_used(&self, key: &SlotKey, period: Period) -> u64 {
        let now = self.clock.now();
        self.lock().slot_used(&QuotaKey { slot: key.clone(), period }, now)
    }

    /// A snapshot of every slot with a cooldown record.
    pub fn health(&self) -> Vec<(SlotKey, SlotHealth)> {
        let mut all: Vec<_> = self.lock().health.iter().map(|(k, h)| (k.clone(), h.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    pub fn health_of(&self, key: &SlotKey) -> Option<SlotHealth> {
        self.lock().health.get(key).cloned()
    }

    pub fn stats_of(&self, key: &SlotKey) -> Option<Stats> {
        self.lock().stats.get(key).cloned()
    }

    /// The live binding of a fingerprint, if any.
    pub fn bound(&self, fingerprint: &str) -> Option<SlotKey> {
        let now = self.clock.now();
        self.lock().affinity.get(fingerprint, now, self.policy.affinity.ttl()).map(|b| b.slot.clone())
    }

    /// Clears cooldowns (all, or those of one source and/or model); returns how many.
    pub fn clear(&self, source: Option<&str>, model: Option<&str>) -> usize {
        let mut inner = self.lock();
        let cleared: Vec<SlotKey> = inner.health.keys().filter(|k| matches(k, source, model)).cloned().collect();
        for key in &cleared {
            inner.health.remove(key);
        }
        let count = cleared.len();
        self.keep(inner, cleared.into_iter().map(|key| StateChange::Cooldown(key, None)).collect());
        count
    }

    /// Drops affinity bindings (all, or those to one source); returns how many.
    pub fn clear_affinity(&self, source: Option<&str>) -> usize {
        let mut inner = self.lock();
        let cleared = inner.affinity.clear(source);
        self.keep(inner, vec![StateChange::ClearBindings(source.map(str::to_string))]);
        cleared
    }

    /// Forgets scorer statistics (all, or of one source and/or model); returns how many.
    pub fn reset_stats(&self, source: Option<&str>, model: Option<&str>) -> usize {
        let mut inner = self.lock();
        let reset: Vec<SlotKey> = inner.stats.keys().filter(|k| matches(k, source, model)).cloned().collect();
        for key in &reset {
            inner.stats.remove(key);
        }
        let count = reset.len();
        self.keep(inner, reset.into_iter().map(|key| StateChange::Stats(key, None)).collect());
        count
    }

    /// The other replicas' tokens in a slot's quota window (`shared_state`).
    pub fn set_shared_usage(&self, slot: &SlotKey, period: Period, others: Usage) {
        self.lock().others.usage.insert(QuotaKey { slot: slot.clone(), period }, others);
    }

    /// What the other replicas counted in an account's window (`shared_state`).
    pub fn set_shared_key_usage(&self, key: &Account, period: Period, others: Usage) {
        self.lock().others.key_usage.insert((key.clone(), period), others);
    }

    /// Requests the other replicas started on `source` in the last minute (`shared_state`).
    pub fn set_rpm_others(&self, source: &SourceName, others: u32) {
        self.lock().others.rpm.insert(source.clone(), others);
    }

    /// A slot's health as another replica recorded it (`None`: healed there). This replica's
    /// own probes in flight stay counted; nothing is persisted or sent on.
    pub fn adopt_health(&self, slot: &SlotKey, health: Option<SlotHealth>) {
        let mut inner = self.lock();
        match health {
            Some(mut health) => {
                health.probes_in_flight = inner.health.get(slot).map_or(0, |h| h.probes_in_flight);
                inner.health.insert(slot.clone(), health);
            }
            None => {
                inner.health.remove(slot);
            }
        }
    }

    /// A conversation another replica bound to a slot.
    pub fn adopt_binding(&self, fingerprint: String, slot: SlotKey, at: UnixMs) {
        if !self.policy.affinity.enabled {
            return;
        }
        let mut inner = self.lock();
        inner.affinity.bind(fingerprint, slot, at);
        // Counted like this replica's own, so a replica serving little still prunes them.
        inner.binds_since_prune += 1;
        if inner.binds_since_prune >= 1024 {
            inner.binds_since_prune = 0;
            inner.affinity.prune(self.clock.now(), self.policy.affinity.ttl());
        }
    }

    /// Forgets what the other replicas started in the last minute: a count no longer
    /// refreshed (Redis away) must not keep limiting this one.
    pub fn forget_rpm_others(&self) {
        self.lock().others.rpm.clear();
    }

    /// Waits until every change so far is on disk.
    pub fn flush(&self) {
        if let Some(store) = &self.store {
            store.flush();
        }
    }
}

fn matches(key: &SlotKey, source: Option<&str>, model: Option<&str>) -> bool {
    source.is_none_or(|s| key.source.as_str() == s) && model.is_none_or(|m| key.model == m)
}

#[cfg(test)]
mod tests;
