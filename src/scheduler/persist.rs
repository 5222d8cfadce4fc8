//! How the scheduler's state outlives the process: what it hands over (`StateChange`), what it
//! gets back at start (`Loaded`), and the trait a store implements (`state` does, in SQLite).

use std::collections::HashMap;

use super::{Binding, QuotaKey, SlotHealth, Stats};
use crate::domain::{Account, Period, SlotKey, UnixMs, Usage};

/// One change to keep, as a whole value (the store writes the latest it was given).
#[derive(Debug, Clone, PartialEq)]
pub enum StateChange {
    /// A slot's health; `None`: healthy again.
    Cooldown(SlotKey, Option<SlotHealth>),
    /// A slot's scorer statistics; `None`: forgotten.
    Stats(SlotKey, Option<Stats>),
    Usage(QuotaKey, Usage),
    KeyUsage(Account, Period, Usage),
    /// A conversation fingerprint bound to a slot at a moment.
    Bind(String, SlotKey, UnixMs),
    /// Every binding, or those to one source, dropped.
    ClearBindings(Option<String>),
    /// Bindings last used before this moment dropped.
    PruneBindings(UnixMs),
}

/// What a store held at start.
#[derive(Debug, Default)]
pub struct Loaded {
    pub cooldowns: HashMap<SlotKey, SlotHealth>,
    pub stats: HashMap<SlotKey, Stats>,
    pub bindings: Vec<(String, Binding)>,
    pub usage: HashMap<QuotaKey, Usage>,
    pub key_usage: HashMap<(Account, Period), Usage>,
}

/// Where the scheduler keeps its state. `keep` is called in the order the changes were made
/// and must not block on I/O for long (the state store journals and queues). A served call's
/// scores, usage and bindings may be held until the call's log row is written with them.
pub trait Persist: Send + Sync {
    /// What the store held at start (once; later calls get nothing).
    fn take_loaded(&self) -> Loaded;
    fn keep(&self, changes: Vec<StateChange>);
    /// Waits until every change so far is on disk.
    fn flush(&self);
}
