//! Replicas' shared state in Redis (`shared_state:`): cooldowns and probes, rpm windows, token
//! quotas and affinity hold across gateway processes, and runtime edits reach every replica.
//! Each replica still decides from its own scheduler, on the hot path without waiting on
//! Redis; this module sends it what it did and feeds it what the others did, every `sync_ms`.

mod cache;
mod counters;
mod events;
mod keys;
mod link;
mod listen;
mod outbox;
mod publish;
mod sync;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use futures::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::config::{FailMode, SharedStateConfig};
use crate::domain::{Account, Period, SlotKey, SourceName, UnixMs};
use crate::scheduler::{Persist, Scheduler};
use counters::Counters;
use events::What;
pub use keys::Keys;
use link::Link;
use outbox::Tee;
pub use publish::hex_sha256;

/// How long a probe claim is held at most (a probe that ends gives it back earlier).
const PROBE_HOLD_MAX: Duration = Duration::from_secs(120);
/// The hot path waits this long for Redis at most (a probe claim); past it, it fails open.
const CLAIM_TIMEOUT: Duration = Duration::from_millis(250);
/// The shortest life of a replica's claim on its name.
const MIN_CLAIM_TTL: Duration = Duration::from_secs(3);
/// How often a replica starting under a taken name looks whether the claim ran out.
const CLAIM_RETRY: Duration = Duration::from_millis(250);

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
    /// An audit entry another replica wrote: kept in this replica's trail too.
    fn adopt_audit(&self, entry: crate::access::AuditEntry);
}

#[derive(Debug, Default, Clone)]
pub struct Watched {
    pub slots: Vec<(SlotKey, Period)>,
    /// Key token quotas and key and group budgets.
    pub keys: Vec<(Account, Period)>,
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
    /// Places for cached answers on their way to Redis: past them an answer stays this
    /// replica's own (a slow Redis never piles answers up in memory).
    cache_puts: Arc<tokio::sync::Semaphore>,
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
            cache_puts: Arc::new(tokio::sync::Semaphore::new(cache::PUTS_IN_FLIGHT)),
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

    fn own(&self) -> std::sync::MutexGuard<'_, Own> {
        self.own.lock().unwrap_or_else(|p| p.into_inner())
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
}
