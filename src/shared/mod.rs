//! Replicas' shared state in Redis (`shared_state:`): cooldowns and probes, rpm windows, token
//! quotas and affinity hold across gateway processes, and runtime edits reach every replica.
//! Each replica still decides from its own scheduler, on the hot path without waiting on
//! Redis; this module sends it what it did and feeds it what the others did, every `sync_ms`.

mod counters;
mod events;
mod keys;
mod link;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use futures::StreamExt;
use futures::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::config::{FailMode, SharedStateConfig};
use crate::domain::{KeyName, Period, SlotKey, SourceName, UnixMs};
use crate::scheduler::{Loaded, Persist, Scheduler, SlotHealth, StateChange, Usage};
use counters::Counters;
use events::{Event, What};
pub use keys::Keys;
use link::Link;

/// How long a probe claim is held at most (a probe that ends gives it back earlier).
const PROBE_HOLD_MAX: Duration = Duration::from_secs(120);
/// The hot path waits this long for Redis at most (a probe claim); past it, it fails open.
const CLAIM_TIMEOUT: Duration = Duration::from_millis(250);
/// A runtime file bigger than this is not taken from Redis.
const MAX_RUNTIME_BYTES: usize = 16 << 20;
/// Most own changes carried from one sync to the next while Redis is away.
const MAX_OUTBOX: usize = 10_000;
/// The shortest life of a replica's claim on its name.
const MIN_CLAIM_TTL: Duration = Duration::from_secs(3);
/// How often a replica starting under a taken name looks whether the claim ran out.
const CLAIM_RETRY: Duration = Duration::from_millis(250);

/// How long a runtime file this replica refused waits before it is read again.
const RUNTIME_RETRY: Duration = Duration::from_secs(2);
/// Most cooldowns taken from Redis in one read.
const MAX_SHARED_COOLDOWNS: usize = 100_000;
/// Most uploaded adapters taken from Redis in one catch-up.
const MAX_SHARED_ADAPTERS: usize = 256;

/// What a replica offers the sync.
pub trait Replica: Send + Sync + 'static {
    fn scheduler(&self) -> &Scheduler;
    /// The counters worth reading back: slots and keys with a quota, sources with an rpm.
    fn watched(&self) -> Watched;
    /// The runtime file as this replica has it now (YAML).
    fn runtime_yaml(&self) -> String;
    /// A runtime file another replica made: checked like an admin edit and put in use.
    fn adopt_runtime(&self, yaml: String) -> BoxFuture<'_, Result<(), String>>;
    /// An adapter another replica's operator uploaded: checked like an upload and put in use.
    fn install_adapter(&self, name: String, bytes: Vec<u8>) -> BoxFuture<'_, Result<(), String>>;
    /// An adapter another replica's operator deleted.
    fn remove_adapter(&self, name: &str) -> Result<(), String>;
}

#[derive(Debug, Default, Clone)]
pub struct Watched {
    pub slots: Vec<(SlotKey, Period)>,
    pub keys: Vec<(KeyName, Period)>,
    pub rpm: Vec<SourceName>,
}

/// This replica's own changes, between syncs.
#[derive(Default)]
struct Own {
    counters: Counters,
    /// Cooldown changes and bindings to publish, in order.
    outbox: Vec<What>,
    /// Probe claims this replica holds and gives back.
    released: Vec<SlotKey>,
}

pub struct Shared {
    config: SharedStateConfig,
    /// This process among the replicas: its name and a random part, so a restarted replica (or
    /// two given one name by mistake) never takes another's events or probe claim as its own.
    instance: String,
    keys: Keys,
    client: redis::Client,
    conn: ArcSwapOption<ConnectionManager>,
    link: Link,
    own: Mutex<Own>,
    /// The runtime version this replica has (made or adopted).
    runtime_version: std::sync::atomic::AtomicU64,
    /// The SHA-256 of each adapter this replica has from an upload (its own or another's).
    adapters: Mutex<HashMap<String, String>>,
    /// Runtime edits handed to `publish_runtime`, and the last one sent (or skipped as stale).
    publish_seq: std::sync::atomic::AtomicU64,
    published: tokio::sync::Mutex<u64>,
    /// A runtime edit of this replica's that did not reach Redis yet.
    runtime_unsent: std::sync::atomic::AtomicBool,
    /// When a refused runtime version is read again.
    retry_runtime_at: Mutex<Option<std::time::Instant>>,
    /// A runtime version that failed to apply, logged once while it is retried.
    rejected_runtime: std::sync::atomic::AtomicU64,
    /// The cooldown hash's version as last read (`u64::MAX`: read it at the next sync).
    cooldowns_seen: std::sync::atomic::AtomicU64,
    /// Exchanges completed with Redis (for the admin API: a test or an operator sees syncs go by).
    syncs: std::sync::atomic::AtomicU64,
    /// Another live process holds this replica's name (reported once until it clears).
    name_conflict: std::sync::atomic::AtomicBool,
}

/// How a replica's link to the others stands, as the admin API shows it.
#[derive(Debug, serde::Serialize)]
pub struct Status {
    pub name: String,
    /// Another live replica has this name (its counters and this one's overwrite each other).
    pub name_conflict: bool,
    pub reachable: bool,
    pub syncs: u64,
    pub runtime_version: u64,
}

impl Shared {
    /// Checks the URL; connects later (a replica starts whether or not Redis is there).
    pub fn new(config: SharedStateConfig) -> anyhow::Result<Arc<Shared>> {
        let client = redis::Client::open(config.url.expose())
            .map_err(|_| anyhow::anyhow!("shared_state.url: not a Redis URL the client can use"))?;
        Ok(Arc::new(Shared {
            instance: format!("{}#{}", config.replica, &uuid::Uuid::new_v4().simple().to_string()[..8]),
            keys: Keys::new(&config.prefix),
            client,
            conn: ArcSwapOption::empty(),
            link: Link::default(),
            own: Mutex::new(Own::default()),
            runtime_version: Default::default(),
            syncs: Default::default(),
            cooldowns_seen: std::sync::atomic::AtomicU64::new(u64::MAX),
            adapters: Default::default(),
            rejected_runtime: Default::default(),
            retry_runtime_at: Default::default(),
            runtime_unsent: Default::default(),
            publish_seq: Default::default(),
            published: Default::default(),
            name_conflict: Default::default(),
            config,
        }))
    }

    pub fn replica(&self) -> &str {
        &self.config.replica
    }

    pub fn status(&self) -> Status {
        use std::sync::atomic::Ordering::Relaxed;
        Status {
            name: self.config.replica.clone(),
            name_conflict: self.name_conflict.load(Relaxed),
            reachable: self.reachable(),
            syncs: self.syncs.load(Relaxed),
            runtime_version: self.runtime_version.load(Relaxed),
        }
    }

    /// Whether Redis answers now (as of the last exchange).
    pub fn reachable(&self) -> bool {
        self.conn.load().is_some() && !self.link.is_down()
    }

    /// Requests that spend a quota are refused while Redis is away (`quotas_when_down: closed`).
    pub fn quotas_refused(&self) -> bool {
        self.config.quotas_when_down == FailMode::Closed && !self.reachable()
    }

    /// The scheduler's store, with this replica's changes also sent to the others.
    pub fn persist(self: &Arc<Self>, store: Arc<dyn Persist>) -> Arc<dyn Persist> {
        Arc::new(Tee { store, shared: self.clone() })
    }

    /// Starts the sync and the event listener for `replica` (they end with it).
    pub fn start(self: &Arc<Self>, replica: Weak<dyn Replica>) {
        let shared = self.clone();
        let weak = replica.clone();
        crate::tasks::spawn("replica sync", async move { shared.sync_loop(weak).await });
        let shared = self.clone();
        crate::tasks::spawn("replica event listener", async move { shared.listen_loop(replica).await });
    }

    /// One last exchange (at shutdown), bounded to a second; nothing happens without Redis.
    pub async fn last_sync(&self, replica: &dyn Replica) {
        let Some(mut conn) = self.conn.load_full().map(|c| ConnectionManager::clone(&c)) else { return };
        match tokio::time::timeout(Duration::from_secs(1), self.sync(&mut conn, replica)).await {
            Ok(Ok(())) => tracing::info!("sent this replica's last counts to the others"),
            _ => tracing::warn!("this replica's last counts did not reach the others"),
        }
        // The name is free for a replacement at once (only this process's own claim).
        let _: Result<i64, _> = redis::cmd("EVAL")
            .arg("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0")
            .arg(1)
            .arg(self.keys.replica_claim(&self.config.replica))
            .arg(&self.instance)
            .query_async(&mut conn)
            .await;
    }

    /// How long a replica's claim on its name lives without being renewed (each sync renews it).
    fn claim_ttl(&self) -> Duration {
        (self.config.sync * 3).max(MIN_CLAIM_TTL)
    }

    /// Takes this replica's name, or renews it: true when this process holds it now, false
    /// when another live process does.
    async fn claim_name(&self, conn: &mut ConnectionManager) -> redis::RedisResult<bool> {
        const SCRIPT: &str = "local held = redis.call('GET', KEYS[1])
            if held == false or held == ARGV[1] then
                redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
            return 0";
        let held: i64 = redis::cmd("EVAL")
            .arg(SCRIPT)
            .arg(1)
            .arg(self.keys.replica_claim(&self.config.replica))
            .arg(&self.instance)
            .arg(self.claim_ttl().as_millis() as u64)
            .query_async(conn)
            .await?;
        Ok(held == 1)
    }

    /// At start: refuses to run under a name another live replica holds (their counters would
    /// overwrite each other's, and quotas and rpm would stop being shared). A claim left by a
    /// process that died expires within its lifetime: it is waited out. Without Redis now, the
    /// first sync that reaches it checks instead.
    pub async fn claim_name_at_start(&self) -> Result<(), String> {
        let Some(mut conn) = self.connection().await else { return Ok(()) };
        // A live holder renews its claim every sync; a dead one's runs out within the TTL.
        let deadline = tokio::time::Instant::now() + self.claim_ttl() + self.config.sync;
        loop {
            match self.claim_name(&mut conn).await {
                Ok(true) => return Ok(()),
                Ok(false) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(CLAIM_RETRY).await;
                }
                Ok(false) => {
                    return Err(format!(
                        "another live replica is named `{name}` on this Redis (shared_state.prefix `{prefix}`): replicas of one name overwrite each other's counters, so quotas and rpm would not be shared. Give each replica its own name: shared_state.replica (e.g. {name}-2); it defaults to the host name",
                        name = self.config.replica,
                        prefix = self.config.prefix,
                    ));
                }
                // Redis went away meanwhile: the syncs check when it is back.
                Err(e) => {
                    self.link.failed(&e.to_string());
                    return Ok(());
                }
            }
        }
    }

    /// Claims the one probe of a cooling slot across replicas, for `hold` at most. Fails open:
    /// without an answer from Redis in time the local admission stands.
    pub async fn claim_probe(&self, slot: &SlotKey, hold: Duration) -> bool {
        let Some(conn) = self.conn.load_full() else { return true };
        let mut conn = ConnectionManager::clone(&conn);
        let hold = hold.min(PROBE_HOLD_MAX).as_millis().max(1) as u64;
        let mut set = redis::cmd("SET");
        set.arg(self.keys.probe(slot)).arg(&self.instance).arg("NX").arg("PX").arg(hold);
        let claim = set.query_async::<Option<String>>(&mut conn);
        match tokio::time::timeout(CLAIM_TIMEOUT, claim).await {
            Ok(Ok(taken)) => taken.is_some(),
            // Only the sync loop says whether Redis is up; this path fails open quietly.
            Ok(Err(e)) => {
                tracing::debug!("probe claim not answered: {}", crate::logsafe::Escaped(&e.to_string()));
                true
            }
            Err(_) => true,
        }
    }

    /// Gives back a probe claim (at the next sync).
    pub fn release_probe(&self, slot: &SlotKey) {
        self.own().released.push(slot.clone());
    }

    /// Counts a request this replica started on `source` against the shared rpm window.
    pub fn rpm_taken(&self, source: &SourceName, now: UnixMs) {
        let second = now.0 / 1000;
        let key = self.keys.rpm(source, second);
        self.own().counters.add(key, 1, Some(UnixMs((second + 120) * 1000)));
    }

    /// Sends a runtime file this replica's admin API made; the others adopt it.
    pub fn publish_runtime(self: &Arc<Self>, yaml: String) {
        use std::sync::atomic::Ordering::SeqCst;
        let shared = self.clone();
        let seq = self.publish_seq.fetch_add(1, SeqCst) + 1;
        crate::tasks::spawn("runtime publisher", async move {
            // One at a time, newest edit only: two quick edits cannot reach Redis out of order.
            let mut published = shared.published.lock().await;
            if *published >= seq {
                return;
            }
            *published = seq;
            let stored = match shared.conn.load_full() {
                Some(conn) => shared.store_runtime(&mut ConnectionManager::clone(&conn), &yaml).await,
                None => Err(redis::RedisError::from((redis::ErrorKind::Io, "not connected yet"))),
            };
            // The version is not taken as this replica's own: its next sync reads it back and
            // adopts it (a no-op when nothing came between), so if another replica's edit was
            // adopted meanwhile, every replica still ends on the same file.
            if let Err(e) = stored {
                // Sent when Redis answers again (see `resync`).
                shared.runtime_unsent.store(true, SeqCst);
                tracing::warn!(
                    "shared state unreachable: this runtime edit reaches the other replicas when it returns"
                );
                tracing::debug!("runtime edit not sent: {}", crate::logsafe::Escaped(&e.to_string()));
            }
        });
    }

    /// Sends an adapter this replica's admin API installed; the others install it too.
    pub fn publish_adapter(self: &Arc<Self>, name: &str, bytes: axum::body::Bytes) {
        let sha256 = hex_sha256(&bytes);
        self.adapters.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), sha256.clone());
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("HSET").arg(self.keys.adapters()).arg(name).arg(bytes.as_ref()).ignore();
        pipe.cmd("HSET").arg(self.keys.adapter_hashes()).arg(name).arg(&sha256).ignore();
        self.announce(pipe, What::Adapter { name: name.to_string(), sha256 }, "this adapter upload");
    }

    /// Sends an adapter deletion this replica's admin API made.
    pub fn publish_adapter_removed(self: &Arc<Self>, name: &str) {
        self.adapters.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("HDEL").arg(self.keys.adapters()).arg(name).ignore();
        pipe.cmd("HDEL").arg(self.keys.adapter_hashes()).arg(name).ignore();
        self.announce(pipe, What::AdapterRemoved { name: name.to_string() }, "this adapter deletion");
    }

    /// Runs `pipe` and then publishes `what`, in the background (see `send_later`).
    fn announce(self: &Arc<Self>, mut pipe: redis::Pipeline, what: What, about: &'static str) {
        let event = Event { from: self.instance.clone(), what };
        pipe.cmd("PUBLISH")
            .arg(self.keys.events())
            .arg(serde_json::to_string(&event).expect("an event serialises"))
            .ignore();
        self.send_later(pipe, about);
    }

    /// Runs `pipe` on Redis in the background; while Redis is away the edit stays local.
    fn send_later(self: &Arc<Self>, pipe: redis::Pipeline, what: &'static str) {
        let shared = self.clone();
        crate::tasks::spawn("redis write", async move {
            let Some(mut conn) = shared.conn.load_full().map(|c| ConnectionManager::clone(&c)) else {
                tracing::warn!("shared state unreachable: {what} stays on this replica");
                return;
            };
            if let Err(e) = pipe.query_async::<()>(&mut conn).await {
                tracing::warn!("{what} did not reach the other replicas: {}", crate::logsafe::Escaped(&e.to_string()));
            }
        });
    }

    /// Installs the adapter `name` from Redis unless this replica has those bytes already.
    async fn fetch_adapter(
        &self,
        conn: &mut ConnectionManager,
        replica: &dyn Replica,
        name: &str,
        sha256: &str,
    ) -> redis::RedisResult<()> {
        if self.adapters.lock().unwrap_or_else(|p| p.into_inner()).get(name).is_some_and(|have| have == sha256) {
            return Ok(());
        }
        let bytes: Option<Vec<u8>> = redis::cmd("HGET").arg(self.keys.adapters()).arg(name).query_async(conn).await?;
        let Some(bytes) = bytes else { return Ok(()) };
        let got = hex_sha256(&bytes);
        if got != sha256 {
            // A newer upload replaced it meanwhile: its own event follows.
            return Ok(());
        }
        match replica.install_adapter(name.to_string(), bytes).await {
            Ok(()) => {
                self.adapters.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), got);
                // A runtime file refused for want of this adapter is read again at once.
                *self.retry_runtime_at.lock().unwrap_or_else(|p| p.into_inner()) = None;
                tracing::info!(adapter = %crate::logsafe::Escaped(name), "installed an adapter another replica uploaded");
            }
            Err(why) => {
                tracing::warn!(adapter = %crate::logsafe::Escaped(name), "an adapter another replica uploaded was not installed: {why}")
            }
        }
        Ok(())
    }

    /// Every shared adapter this replica lacks (at start, and after Redis was away).
    async fn fetch_adapters(&self, conn: &mut ConnectionManager, replica: &dyn Replica) -> redis::RedisResult<()> {
        let all: HashMap<String, String> =
            redis::cmd("HGETALL").arg(self.keys.adapter_hashes()).query_async(conn).await?;
        for (name, sha256) in all.into_iter().take(MAX_SHARED_ADAPTERS) {
            self.fetch_adapter(conn, replica, &name, &sha256).await?;
        }
        Ok(())
    }

    fn own(&self) -> std::sync::MutexGuard<'_, Own> {
        self.own.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes a runtime file with the next version and announces it, in one step.
    /// The version is above this replica's own too, so a Redis restarted empty (counting from
    /// 1 again) still hands the others a version newer than theirs.
    async fn store_runtime(&self, conn: &mut ConnectionManager, yaml: &str) -> redis::RedisResult<u64> {
        const SCRIPT: &str = "local v = redis.call('INCR', KEYS[1])
            local floor = tonumber(ARGV[3])
            if v <= floor then v = floor + 1 redis.call('SET', KEYS[1], v) end
            redis.call('SET', KEYS[2], ARGV[1]) redis.call('SET', KEYS[3], ARGV[2])
            redis.call('PUBLISH', KEYS[4], cjson.encode({from = ARGV[2], runtime = {version = v}}))
            return v";
        redis::cmd("EVAL")
            .arg(SCRIPT)
            .arg(4)
            .arg(self.keys.runtime_version())
            .arg(self.keys.runtime_file())
            .arg(self.keys.runtime_from())
            .arg(self.keys.events())
            .arg(yaml)
            .arg(&self.instance)
            .arg(self.runtime_version.load(std::sync::atomic::Ordering::SeqCst))
            .query_async(conn)
            .await
    }

    async fn connection(&self) -> Option<ConnectionManager> {
        if let Some(conn) = self.conn.load_full() {
            return Some(ConnectionManager::clone(&conn));
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(1);
        match ConnectionManager::new_with_config(self.client.clone(), config).await {
            Ok(conn) => {
                self.conn.store(Some(Arc::new(conn.clone())));
                Some(conn)
            }
            Err(e) => {
                self.link.failed(&e.to_string());
                None
            }
        }
    }

    async fn sync_loop(self: Arc<Self>, replica: Weak<dyn Replica>) {
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
    async fn sync(&self, conn: &mut ConnectionManager, replica: &dyn Replica) -> redis::RedisResult<()> {
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
            read.push(self.keys.key_tokens(key, *period, period.window(now).0));
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
    async fn fetch_runtime(&self, conn: &mut ConnectionManager, replica: &dyn Replica) -> redis::RedisResult<()> {
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

    /// Listens to the others' events as they happen; reconnects when the link drops.
    async fn listen_loop(self: Arc<Self>, replica: Weak<dyn Replica>) {
        let mut listen_down = false;
        loop {
            if replica.strong_count() == 0 {
                return;
            }
            match self.client.get_async_pubsub().await {
                Ok(mut pubsub) => {
                    if pubsub.subscribe(self.keys.events()).await.is_ok() {
                        let mut messages = pubsub.on_message();
                        while let Some(message) = messages.next().await {
                            let Some(replica) = replica.upgrade() else { return };
                            let Ok(payload) = message.get_payload::<Vec<u8>>() else { continue };
                            self.apply(&payload, replica.as_ref()).await;
                        }
                    }
                }
                Err(e) => {
                    if !listen_down {
                        tracing::warn!(
                            "cannot listen to the other replicas' events (the sync still exchanges their state): {}",
                            crate::logsafe::Escaped(&e.to_string())
                        );
                    }
                    listen_down = true;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            }
            listen_down = false;
            // Reconnecting: the real clock, not the scheduler's (a test's clock stands still).
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn apply(&self, payload: &[u8], replica: &dyn Replica) {
        let Some(event) = Event::read(payload) else { return };
        if event.from == self.instance {
            return;
        }
        let scheduler = replica.scheduler();
        match event.what {
            // A change of this replica's own still to send is newer than what it hears.
            What::Health { slot, health } => {
                if !self.own().outbox.iter().any(|w| matches!(w, What::Health { slot: mine, .. } if *mine == slot)) {
                    scheduler.adopt_health(&slot, health)
                }
            }
            What::Bind { fingerprint, slot, at } => scheduler.adopt_binding(fingerprint, slot, at),
            What::Adapter { name, sha256 } => {
                if let Some(mut conn) = self.connection().await
                    && let Err(e) = self.fetch_adapter(&mut conn, replica, &name, &sha256).await
                {
                    // The next catch-up after the link returns takes it.
                    tracing::debug!("adapter not fetched: {}", crate::logsafe::Escaped(&e.to_string()));
                }
            }
            What::AdapterRemoved { name } => {
                self.adapters.lock().unwrap_or_else(|p| p.into_inner()).remove(&name);
                match replica.remove_adapter(&name) {
                    Ok(()) => {
                        tracing::info!(adapter = %crate::logsafe::Escaped(&name), "deleted an adapter another replica deleted")
                    }
                    Err(why) => {
                        tracing::warn!(adapter = %crate::logsafe::Escaped(&name), "an adapter another replica deleted stays here: {why}")
                    }
                }
            }
            What::Runtime { version } => {
                if version > self.runtime_version.load(std::sync::atomic::Ordering::SeqCst)
                    && let Some(mut conn) = self.connection().await
                    && let Err(e) = self.fetch_runtime(&mut conn, replica).await
                {
                    // The sync reads the version again.
                    tracing::debug!("runtime file not fetched: {}", crate::logsafe::Escaped(&e.to_string()));
                }
            }
        }
    }

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
                    let key = self.keys.key_tokens(name, *period, usage.window_start);
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
            let key = self.keys.key_tokens(name, *period, usage.window_start);
            own.counters.set(key, usage.tokens, keys::expires_at(*period, usage.window_start));
        }
    }
}

/// `earlier` then `later`, keeping only the newest health of each slot (what the others need is
/// where a slot stands, not its history) and, past `MAX_OUTBOX`, dropping the oldest bindings
/// first: a lost binding costs a cache miss, a lost heal would keep a source skipped.
fn merge_outbox(earlier: Vec<What>, later: Vec<What>) -> Vec<What> {
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

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The scheduler's store, with every change also recorded for the other replicas.
struct Tee {
    store: Arc<dyn Persist>,
    shared: Arc<Shared>,
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
