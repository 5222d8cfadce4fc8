//! The boot sequence shared by `serve`, `check` and the desktop app: config → data_dir → state
//! database → plugin host (built-ins, adapter_dir overrides, compiled cache) → gateway → listener.

use std::path::Path;
use std::sync::Arc;

use crate::config::{self, AdminToken, ConfigError, LoadedConfig, Secret};
use crate::plugin::{BUILTIN_ADAPTERS, BUNDLED_SCRIPTS, LoadReport, PluginHost};
use crate::scheduler::{Clock, Persist, Policy, Scheduler, SystemClock};
use crate::server::Gateway;

/// A gateway serving in this process: what `switchyard serve` runs, and the desktop app.
pub struct Serving {
    pub gateway: Arc<Gateway>,
    /// Where it listens (the port the system chose when the config says 0).
    pub addr: std::net::SocketAddr,
    listener: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Why a gateway did not start serving; each says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0:#}")]
    Build(anyhow::Error),
    #[error("{0}")]
    Replica(String),
    #[error("cannot listen on {addr}: {error}\n    fix: choose a free address under `listen:` in the config")]
    Listen { addr: std::net::SocketAddr, error: std::io::Error },
}

/// Builds the gateway and serves it on the config's `listen` address until `shutdown`
/// resolves: replicas' sharing, model detection, the Telegram bot included.
pub async fn start(
    config: LoadedConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Serving, StartError> {
    let listen = config.settings().listen;
    let started = std::time::Instant::now();
    let (gateway, report) = build(config).await.map_err(StartError::Build)?;
    // Serving only: `check` stays offline.
    gateway.claim_replica_name().await.map_err(|e| StartError::Replica(e.to_string()))?;
    gateway.start_shared();
    gateway.detect_at_start().await;
    tracing::info!(
        compiled = report.compiled,
        cache_hits = report.cache_hits,
        warnings = report.warnings.len(),
        "adapters ready in {} ms",
        started.elapsed().as_millis()
    );
    raise_open_file_limit(gateway.settings.server.max_in_flight);
    return_freed_memory();
    shrink_idle_pools(&gateway);
    let runtime = gateway.runtime();
    let unpriced = runtime.prices.unpriced(&runtime.config);
    if gateway.settings.pricing.costs && !unpriced.is_empty() {
        tracing::warn!(
            models = %crate::logsafe::Escaped(&unpriced.join(", ")),
            "models without a price: their cost is logged as unknown (add them under `prices:`, docs/costs.md)"
        );
    }
    if runtime.config.keys.is_empty() && runtime.config.runtime_keys.is_empty() {
        tracing::warn!("no gateway keys are configured: every /v1 request will be refused (add keys: to the config)");
    }
    let (addr, listener) = crate::server::serve(Arc::clone(&gateway), listen, shutdown)
        .await
        .map_err(|error| StartError::Listen { addr: listen, error })?;
    tracing::info!("switchyard listening on http://{addr}");
    if let Some(telegram) = &gateway.settings.telegram {
        let bot = crate::telegram::Bot::new(gateway.clone(), telegram, Arc::new(crate::telegram::Sleep));
        Arc::new(bot).spawn();
        tracing::info!(chats = telegram.allowed_chats.len(), "telegram bot started (long polling)");
    }
    Ok(Serving { gateway, addr, listener })
}

impl Serving {
    /// Waits until the listener has stopped (its shutdown resolved and open requests
    /// finished), then commits the state and leaves the replicas.
    pub async fn finish(self) -> Result<(), String> {
        let served = self.listener.await;
        // What the writer has not committed yet is in the journal anyway; committing it now
        // spares the next start a replay.
        self.gateway.scheduler.flush();
        self.gateway.stop_shared().await;
        match served {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("server failed: {e}")),
            Err(e) => Err(format!("server task failed: {e}")),
        }
    }
}

/// Reads and validates the config file, knowing the built-in adapters and bundled scripts.
pub fn load_config(file: &Path) -> Result<LoadedConfig, ConfigError> {
    let builtins: Vec<&str> =
        BUILTIN_ADAPTERS.iter().map(|(name, _)| *name).chain(BUNDLED_SCRIPTS.iter().map(|(name, _)| *name)).collect();
    config::load(file, &builtins)
}

/// Prepares `data_dir`, opens the state database and loads every adapter.
pub async fn build(config: LoadedConfig) -> anyhow::Result<(Arc<Gateway>, LoadReport)> {
    build_with_clock(config, Arc::new(SystemClock)).await
}

/// `build` with the scheduler's clock injected (tests move time by hand).
pub async fn build_with_clock(
    mut loaded: LoadedConfig,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<(Arc<Gateway>, LoadReport)> {
    let data_dir = &loaded.settings().data_dir;
    if let Some(owner) = crate::private_fs::root_in_someone_elses(data_dir) {
        anyhow::bail!(
            "data_dir {} belongs to uid {owner}, and this runs as root: the files it would make there \
             (state.db, admin_token) would lock that user out\n    fix: run it as that user, e.g. \
             `sudo -u switchyard switchyard check --config /etc/switchyard/config.yaml` (in a container: \
             `--user 65532`)",
            data_dir.display()
        );
    }
    crate::private_fs::create_dir(data_dir)
        .map_err(|e| anyhow::anyhow!("cannot create data_dir {}: {e}", data_dir.display()))?;
    if loaded.settings().admin_token == AdminToken::Auto {
        let file = loaded.settings().admin_token_file();
        let token = stored_admin_token(&file)
            .map_err(|e| anyhow::anyhow!("cannot keep the admin token in {}: {e}", file.display()))?;
        loaded.update_settings(|s| s.admin_token = AdminToken::Stored(token, file));
    }
    let (config, settings) = (&loaded.effective, loaded.settings());
    // Files an older version wrote 644: the runtime file holds upstream keys.
    let uploads = std::fs::read_dir(&settings.adapter_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .map(|entry| entry.path());
    for file in std::iter::once(settings.runtime_file.clone()).chain(uploads) {
        if let Err(e) = crate::private_fs::restrict(&file) {
            tracing::warn!(file = %file.display(), "cannot make the file private (mode 600): {e}");
        }
    }
    let store = Arc::new(crate::state::StateStore::start(&settings.state_db())?);
    let logs = settings.log_retention_days.filter(|d| *d > 0);
    let responses = settings.response_retention_days.filter(|d| *d > 0);
    let audit = (settings.access.audit_retention_days.get() as u32, settings.access.audit_max_entries.get());
    prune_hourly(store.clone(), clock.clone(), logs, responses, audit);
    let (plugins, report) = PluginHost::load(
        settings.sandbox.limits(settings.body_limit_bytes),
        Some(settings.component_cache_dir()),
        Some(&settings.adapter_dir),
        settings.adapter_grants(),
    )
    .await?;
    for source in &config.sources {
        if plugins.adapter(&source.adapter).is_none() {
            anyhow::bail!(
                "source `{}` uses adapter `{}`, which did not load (see the warnings above)",
                source.name,
                source.adapter
            );
        }
    }
    // Each adapter needs an instance per `sessions_per_instance` requests in flight.
    let instances: u64 = plugins
        .adapters()
        .iter()
        .map(|a| config.adapter_concurrency(a.name()).div_ceil(settings.sessions_per_instance(a.name())) as u64)
        .sum();
    if instances > settings.sandbox.pool_slots as u64 {
        tracing::warn!(
            "the sources' max_concurrent need {instances} adapter instances at sessions_per_instance, over \
             sandbox.pool_slots ({}): past that, attempts wait as busy; raise sandbox.pool_slots to match",
            settings.sandbox.pool_slots
        );
    }
    // With replicas, the scheduler's changes also go to the others (see `crate::shared`).
    let shared = settings.shared_state.clone().map(crate::shared::Shared::new).transpose()?;
    let persist: Arc<dyn Persist> = match &shared {
        Some(shared) => shared.persist(store.clone()),
        None => store.clone(),
    };
    let scheduler = Scheduler::new(Policy::of(config), clock, Some(persist));
    // config.yaml's policies with the runtime file's (uploads included) over them.
    let policies = crate::server::Policies::load(
        &plugins,
        &config.policies,
        &settings.sandbox.limits(settings.body_limit_bytes),
        &settings.data_dir,
    )
    .await?;
    Ok((Arc::new(Gateway::new(loaded, plugins, scheduler, store, shared, policies)?), report))
}

/// The admin token kept in `file` (mode 600), made on the first start: 244 random bits.
fn stored_admin_token(file: &Path) -> std::io::Result<Secret> {
    match std::fs::read_to_string(file) {
        Ok(text) if !text.trim().is_empty() => {
            crate::private_fs::restrict(file)?;
            Ok(Secret::new(text.trim()))
        }
        Ok(_) => Err(std::io::Error::other("the file is empty: delete it to have a new token made")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // uuid's v4 draws from the OS's cryptographic generator.
            let token = format!("sy-{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
            crate::private_fs::write(file, format!("{token}\n"))?;
            tracing::info!(file = %file.display(), "made an admin token for the admin API and the WebUI");
            Ok(Secret::new(token))
        }
        Err(e) => Err(e),
    }
}

/// Deletes request logs and stored responses past their retention now and every hour after.
fn prune_hourly(
    store: Arc<crate::state::StateStore>,
    clock: Arc<dyn Clock>,
    logs: Option<u32>,
    responses: Option<u32>,
    (audit_days, audit_max): (u32, u64),
) {
    let before = move |days: u32| clock.now().0.saturating_sub(days as u64 * 86_400_000);
    crate::tasks::spawn("retention pruner", async move {
        let mut hourly = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            hourly.tick().await;
            if let Some(days) = logs {
                store.prune_logs(before(days));
            }
            if let Some(days) = responses {
                store.prune_responses(before(days));
            }
            store.prune_audit(before(audit_days), audit_max);
        }
    });
}

/// Lets go of adapter instances idle for `IDLE_INSTANCE_TTL`, so a burst's pools shrink back
/// (each adapter keeps one warm instance).
pub fn shrink_idle_pools(gateway: &Arc<Gateway>) {
    let gateway = Arc::downgrade(gateway);
    crate::tasks::spawn("idle pool shrinker", async move {
        let mut every = tokio::time::interval(crate::plugin::IDLE_INSTANCE_TTL / 4);
        loop {
            every.tick().await;
            let Some(gateway) = gateway.upgrade() else { return };
            let now = std::time::Instant::now();
            for adapter in gateway.plugins.adapters() {
                adapter.shrink_idle_pool(now);
            }
        }
    });
}

/// Raises the soft open-file limit to the hard one (service managers start processes at 1024,
/// and a request in flight holds two descriptors: its client's and its upstream's), and warns
/// when even that cannot hold `server.max_in_flight`. Returns the limit in force.
pub fn raise_open_file_limit(max_in_flight: u32) -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct they are given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    // An unlimited hard limit still stops at the kernel's nr_open (2^20 by default).
    let ceiling = limit.rlim_max.min(1 << 20);
    if limit.rlim_cur < ceiling {
        let raised = libc::rlimit { rlim_cur: ceiling, rlim_max: limit.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    let needed = 2 * u64::from(max_in_flight) + 1000;
    if limit.rlim_cur < needed {
        tracing::warn!(
            "the open-file limit ({}) cannot hold server.max_in_flight ({max_in_flight}) requests over HTTP/1.1, which need about {needed}: raise it (`ulimit -n`, systemd's LimitNOFILE=) or lower server.max_in_flight (HTTP/2 clients and sources need no descriptor per request); past it requests get 503",
            limit.rlim_cur
        );
    }
    Some(limit.rlim_cur)
}

/// Hands memory malloc holds but no longer uses back to the OS: once now (compiling adapters
/// at a first start leaves tens of MB free in the heap) and every minute after (a burst of
/// thousands of requests in flight otherwise leaves its peak resident for good).
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    crate::tasks::spawn("malloc trimmer", async {
        let mut every_minute = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            every_minute.tick().await;
            // SAFETY: malloc_trim only walks and shrinks glibc's own heap.
            let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
        }
    });
}
