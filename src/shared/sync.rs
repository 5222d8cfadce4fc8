//! Replicas' sync loop: every `sync_ms`, this replica's totals and events out, the others'
//! counters, the cooldown hash and the runtime file read back in, and the catch-up after Redis was away.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::ConnectionManager;

use super::counters;
use super::events::{Event, What};
use super::outbox::merge_outbox;
use super::{Replica, Shared};
use crate::domain::SlotKey;
use crate::scheduler::{SlotHealth, Usage};

/// A runtime file bigger than this is not taken from Redis.
const MAX_RUNTIME_BYTES: usize = 16 << 20;
/// How long a runtime file this replica refused waits before it is read again.
const RUNTIME_RETRY: Duration = Duration::from_secs(2);
/// Most cooldowns taken from Redis in one read.
const MAX_SHARED_COOLDOWNS: usize = 100_000;

impl Shared {
    pub(super) async fn sync_loop(self: Arc<Self>, replica: Weak<dyn Replica>) {
        let mut tick = tokio::time::interval(self.config.sync);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seeded = false;
        loop {
            tick.tick().await;
            let Some(replica) = replica.upgrade() else { return };
            let Some(mut conn) = self.connection().await else { continue };
            if !seeded {
                seeded = self.seed_runtime(&mut conn, replica.as_ref()).await.is_ok()
                    && self.fetch_adapters(&mut conn, replica.as_ref()).await.is_ok();
            }
            match self.sync(&mut conn, replica.as_ref()).await {
                Ok(()) => {
                    if self.link.succeeded() {
                        self.resync(&mut conn, replica.as_ref()).await;
                    } else if let Err(e) = self.send_unsent_runtime(&mut conn, replica.as_ref()).await {
                        // An edit whose send was still failing when Redis came back (the
                        // resync found nothing unsent yet) goes out at the next sync.
                        self.link.failed(&e.to_string());
                    }
                    self.syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => {
                    self.link.failed(&e.to_string());
                    replica.scheduler().forget_rpm_others();
                }
            }
        }
    }

    /// The first replica to come puts its runtime file in Redis; later ones take the shared one.
    async fn seed_runtime(&self, conn: &mut ConnectionManager, replica: &dyn Replica) -> redis::RedisResult<()> {
        let version: Option<u64> = redis::cmd("GET").arg(self.keys.runtime_version()).query_async(conn).await?;
        if version.is_none() {
            let version = self.store_runtime(conn, &replica.runtime_yaml()).await?;
            self.runtime_version.fetch_max(version, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }

    /// One exchange: this replica's totals and events out, the others' totals and the
    /// versions of the cooldown hash and the runtime file in. Every write is idempotent (a
    /// total, not an increment), so a sync that failed half-way is simply sent again.
    pub(super) async fn sync(&self, conn: &mut ConnectionManager, replica: &dyn Replica) -> redis::RedisResult<()> {
        let scheduler = replica.scheduler();
        let now = scheduler.now();
        let (totals, outbox, released) = {
            let mut own = self.own();
            own.counters.prune(now);
            (own.counters.take_dirty(), std::mem::take(&mut own.outbox), std::mem::take(&mut own.released))
        };
        // Renewed with every sync; a name another live process holds is reported, loudly.
        let held = self.claim_name(conn).await;
        if matches!(held, Ok(false)) && !self.name_conflict.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::error!(
                replica = %crate::logsafe::Escaped(&self.config.replica),
                "another live replica has this replica's name: their counters overwrite each other's, so quotas and rpm are not shared; give each its own shared_state.replica"
            );
        } else if matches!(held, Ok(true)) {
            self.name_conflict.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        let mut pipe = redis::pipe();
        for sent in &totals {
            pipe.cmd("HSET").arg(&sent.key).arg(&self.config.replica).arg(sent.total).ignore();
            if let Some(at) = sent.expire_at {
                pipe.cmd("PEXPIREAT").arg(&sent.key).arg(at.0).ignore();
            }
        }
        for what in &outbox {
            if let What::Health { slot, health } = what {
                let field = serde_json::to_string(slot).expect("a slot key serialises");
                match health {
                    Some(h) => pipe
                        .cmd("HSET")
                        .arg(self.keys.cooldowns())
                        .arg(field)
                        .arg(serde_json::to_string(h).expect("health serialises"))
                        .ignore(),
                    None => pipe.cmd("HDEL").arg(self.keys.cooldowns()).arg(field).ignore(),
                };
            }
            let event = Event { from: self.instance.clone(), what: what.clone() };
            pipe.cmd("PUBLISH")
                .arg(self.keys.events())
                .arg(serde_json::to_string(&event).expect("an event serialises"))
                .ignore();
        }
        if outbox.iter().any(|w| matches!(w, What::Health { .. })) {
            pipe.cmd("INCR").arg(self.keys.cooldowns_version()).ignore();
        }
        for slot in &released {
            // Only this process's own claim: it may have expired and been taken by another.
            pipe.cmd("EVAL")
                .arg("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0")
                .arg(1)
                .arg(self.keys.probe(slot))
                .arg(&self.instance)
                .ignore();
        }
        let watched = replica.watched();
        let mut read: Vec<String> = Vec::new();
        for (slot, period) in &watched.slots {
            read.push(self.keys.slot_tokens(slot, *period, period.window(now).0));
        }
        for (key, period) in &watched.keys {
            read.push(self.keys.account(key, *period, period.window(now).0));
        }
        let second = now.0 / 1000;
        for source in &watched.rpm {
            read.extend((second.saturating_sub(59)..=second).map(|s| self.keys.rpm(source, s)));
        }
        for key in &read {
            pipe.cmd("HGETALL").arg(key);
        }
        pipe.cmd("MGET").arg(self.keys.cooldowns_version()).arg(self.keys.runtime_version());
        let replies: Vec<redis::Value> = match pipe.query_async(conn).await {
            Ok(replies) => replies,
            Err(e) => {
                let mut own = self.own();
                own.counters.resend(&totals);
                own.outbox = merge_outbox(outbox, std::mem::take(&mut own.outbox));
                own.released.extend(released);
                own.released.sort();
                own.released.dedup();
                return Err(e);
            }
        };
        let mut replies = replies.into_iter();
        // The others' part of each counter read, in the order they were asked.
        let mut others = replies.by_ref().take(read.len()).map(|reply| {
            let fields: HashMap<String, String> = redis::FromRedisValue::from_redis_value(reply).unwrap_or_default();
            counters::others(&fields, &self.config.replica)
        });
        for (slot, period) in &watched.slots {
            let tokens = others.next().unwrap_or(0);
            scheduler.set_shared_usage(slot, *period, Usage { window_start: period.window(now).0, tokens });
        }
        for (key, period) in &watched.keys {
            let tokens = others.next().unwrap_or(0);
            scheduler.set_shared_key_usage(key, *period, Usage { window_start: period.window(now).0, tokens });
        }
        for source in &watched.rpm {
            let started: u64 = others.by_ref().take(60).fold(0, u64::saturating_add);
            scheduler.set_rpm_others(source, started.min(u32::MAX as u64) as u32);
        }
        drop(others);
        let versions: Vec<Option<u64>> =
            replies.next().and_then(|v| redis::FromRedisValue::from_redis_value(v).ok()).unwrap_or_default();
        let totals = versions;
        let cooldowns = totals.get(totals.len().wrapping_sub(2)).copied().flatten().unwrap_or(0);
        if self.cooldowns_seen.swap(cooldowns, std::sync::atomic::Ordering::SeqCst) != cooldowns {
            self.adopt_cooldowns(conn, replica).await?;
        }
        let version = totals.last().copied().flatten().unwrap_or(0);
        if version > self.runtime_version.load(std::sync::atomic::Ordering::SeqCst) && !self.waiting_to_retry(version) {
            self.fetch_runtime(conn, replica).await?;
        }
        Ok(())
    }

    /// Takes the shared runtime file when it is newer than this replica's.
    pub(super) async fn fetch_runtime(
        &self,
        conn: &mut ConnectionManager,
        replica: &dyn Replica,
    ) -> redis::RedisResult<()> {
        let (version, file, from): (Option<u64>, Option<Vec<u8>>, Option<String>) = redis::cmd("MGET")
            .arg(self.keys.runtime_version())
            .arg(self.keys.runtime_file())
            .arg(self.keys.runtime_from())
            .query_async(conn)
            .await?;
        let (Some(version), Some(file)) = (version, file) else { return Ok(()) };
        use std::sync::atomic::Ordering::SeqCst;
        // An edit of this replica's that Redis has not seen yet goes out first (the next sync):
        // adopting another file now would overwrite the edit before it was ever sent.
        if version <= self.runtime_version.load(SeqCst) || self.runtime_unsent.load(SeqCst) {
            return Ok(());
        }
        let from = from.unwrap_or_default();
        let adopted = if file.len() > MAX_RUNTIME_BYTES {
            Err(format!("{} bytes, more than {MAX_RUNTIME_BYTES}", file.len()))
        } else {
            match String::from_utf8(file) {
                Ok(yaml) => replica.adopt_runtime(yaml).await,
                Err(_) => Err("not UTF-8".to_string()),
            }
        };
        match adopted {
            Ok(()) => {
                self.runtime_version.fetch_max(version, SeqCst);
                tracing::info!(version, from = %crate::logsafe::Escaped(&from), "adopted the shared runtime file");
            }
            // Retried every few seconds (an adapter it names may still be on its way); logged once.
            Err(why) => {
                *self.retry_runtime_at.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(std::time::Instant::now() + RUNTIME_RETRY);
                if self.rejected_runtime.swap(version, SeqCst) != version {
                    tracing::warn!(version, from = %crate::logsafe::Escaped(&from), "shared runtime file not adopted yet: {why}")
                }
            }
        }
        Ok(())
    }

    /// Whether `version` was refused a moment ago (it is not read again before `RUNTIME_RETRY`).
    fn waiting_to_retry(&self, version: u64) -> bool {
        self.rejected_runtime.load(std::sync::atomic::Ordering::SeqCst) == version
            && self
                .retry_runtime_at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some_and(|at| std::time::Instant::now() < at)
    }

    /// After Redis was away: the cooldowns and adapters the others recorded meanwhile.
    async fn resync(&self, conn: &mut ConnectionManager, replica: &dyn Replica) {
        // The next sync reads the cooldown hash whatever its version.
        self.cooldowns_seen.store(u64::MAX, std::sync::atomic::Ordering::SeqCst);
        // An edit made meanwhile goes out now; a Redis that came back empty gets this
        // replica's file, as at the first start.
        let stored = match self.send_unsent_runtime(conn, replica).await {
            Ok(true) => Ok(()),
            Ok(false) => self.seed_runtime(conn, replica).await,
            Err(e) => Err(e),
        };
        if let Err(e) = stored {
            self.link.failed(&e.to_string());
        }
        if let Err(e) = self.fetch_adapters(conn, replica).await {
            self.link.failed(&e.to_string());
        }
        tracing::info!("shared state resynchronised");
    }

    /// Sends the runtime edit this replica made while Redis was away, if there is one; true
    /// when one was sent.
    async fn send_unsent_runtime(
        &self,
        conn: &mut ConnectionManager,
        replica: &dyn Replica,
    ) -> redis::RedisResult<bool> {
        use std::sync::atomic::Ordering::SeqCst;
        if !self.runtime_unsent.swap(false, SeqCst) {
            return Ok(false);
        }
        match self.store_runtime(conn, &replica.runtime_yaml()).await {
            Ok(version) => {
                self.runtime_version.fetch_max(version, SeqCst);
                Ok(true)
            }
            Err(e) => {
                self.runtime_unsent.store(true, SeqCst);
                Err(e)
            }
        }
    }

    /// Every cooldown the replicas recorded (the hash changed since the last read, or Redis
    /// was away): a missed event cannot leave a failing source unknown here. A slot with a
    /// change of this replica's still to send keeps its own state.
    async fn adopt_cooldowns(&self, conn: &mut ConnectionManager, replica: &dyn Replica) -> redis::RedisResult<()> {
        let all: HashMap<String, String> = redis::cmd("HGETALL").arg(self.keys.cooldowns()).query_async(conn).await?;
        let now = replica.scheduler().now();
        let pending: Vec<SlotKey> = self
            .own()
            .outbox
            .iter()
            .filter_map(|w| if let What::Health { slot, .. } = w { Some(slot.clone()) } else { None })
            .collect();
        for (slot, health) in all.into_iter().take(MAX_SHARED_COOLDOWNS) {
            let (Ok(slot), Ok(health)) =
                (serde_json::from_str::<SlotKey>(&slot), serde_json::from_str::<SlotHealth>(&health))
            else {
                continue;
            };
            if pending.contains(&slot) || health.window.and_then(|w| w.until).is_some_and(|until| until <= now) {
                continue;
            }
            replica.scheduler().adopt_health(&slot, Some(health));
        }
        Ok(())
    }
}
