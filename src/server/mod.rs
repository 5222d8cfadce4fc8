//! The HTTP front door: shared gateway state, the axum router, and serving it.

mod admin;
mod admission;
mod attempt;
mod audit;
mod auth;
mod bill;
mod books;
mod cache;
mod call;
mod chat;
mod client_metrics;
mod conversation;
mod detect;
mod dispatch;
mod embeddings;
mod envelope;
mod error;
mod guarded;
mod images;
mod inflight;
mod listener;
mod messages;
mod metrics;
mod models;
mod modes;
mod notices;
mod passthrough;
mod policy;
mod report;
mod request;
mod responses;
mod scope;
mod sso;
mod throttle;
mod ticket;
mod webui;

use std::sync::Arc;

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::{get, post};

pub use auth::{KeyTable, ModelScope};
pub use error::{ApiError, ErrorType};
pub use listener::serve;
pub use notices::{Notice, Notices};
pub use policy::Policies;

/// The admin API as a service, for operators' tools inside the process (the Telegram bot):
/// the same routes, checks and logs as over HTTP, the admin token still required.
pub use admin::InProcess;

pub fn admin_service(gateway: Arc<Gateway>) -> axum::Router {
    admin::router(gateway.clone()).with_state(gateway)
}

use envelope::FrontDoor;

use arc_swap::ArcSwap;

use crate::config::{Config, LoadedConfig, RuntimeFile, Settings};
use crate::plugin::PluginHost;
use crate::provider::Provider;
use crate::scheduler::Scheduler;
use crate::state::{LogRow, StateStore};

/// What the admin API can change, swapped whole: requests take one snapshot and keep it.
pub struct Runtime {
    /// config.yaml merged with the runtime file.
    pub config: Config,
    /// The runtime file as on disk.
    pub file: RuntimeFile,
    pub provider: Provider,
    pub keys: KeyTable,
    /// What each source's models cost (the operator's prices over the table).
    pub prices: crate::pricing::PriceBook,
    /// The policies `config.policies` defines, loaded.
    pub policies: Arc<policy::Policies>,
}

/// Everything a request handler needs.
pub struct Gateway {
    /// What only a restart changes.
    pub settings: Arc<Settings>,
    /// config.yaml's catalog, which the runtime file is merged onto.
    pub base: Config,
    runtime: ArcSwap<Runtime>,
    pub plugins: PluginHost,
    pub scheduler: Scheduler,
    /// The state database (request logs, and the scheduler's state).
    pub state: Arc<StateStore>,
    /// Prometheus metrics (`GET /metrics`).
    pub metrics: metrics::Metrics,
    /// Places for client requests in flight (`server.max_in_flight`).
    in_flight: Arc<tokio::sync::Semaphore>,
    /// The operator's pause: `/v1` refused while on.
    paused: inflight::Pause,
    /// Admin changes, one at a time.
    edits: tokio::sync::Mutex<()>,
    /// What operators are told about as it happens (a model no source could serve).
    pub notices: Notices,
    /// The models each `detect_models` source's upstream listed last.
    detected: std::sync::Mutex<detect::Detected>,
    /// The other replicas, through Redis (`shared_state`).
    pub shared: Option<Arc<crate::shared::Shared>>,
    /// Wrong admin and metrics tokens per peer address.
    auth_failures: throttle::AuthThrottle,
    /// What each key stored of its Responses turns today.
    stored_budget: responses::StoredBudget,
    /// The price table (shipped, or `pricing.table`), read once.
    pub price_table: Arc<crate::pricing::Table>,
    /// Whole answers kept for requests asked again (`cache`).
    pub cache: cache::ResponseCache,
    /// Policy components loaded for a change not yet in use (an upload), by policy name.
    staged_policies: std::sync::Mutex<policy::Staged>,
    /// Single sign-on for the WebUI (`access.sso`), and its sessions.
    pub sso: Option<sso::Sso>,
}

impl Gateway {
    pub fn new(
        loaded: LoadedConfig,
        plugins: PluginHost,
        scheduler: Scheduler,
        state: Arc<StateStore>,
        shared: Option<Arc<crate::shared::Shared>>,
        policies: policy::Policies,
    ) -> anyhow::Result<Gateway> {
        let LoadedConfig { base, runtime: file, effective: config } = loaded;
        let settings = Arc::clone(&base.settings);
        let metrics = metrics::Metrics::new(plugins.call_durations(), settings.metrics.max_label_sets.get() as usize);
        let in_flight = Arc::new(tokio::sync::Semaphore::new(settings.server.max_in_flight as usize));
        plugins.size_pools(&config);
        let price_table = Arc::new(crate::pricing::load_table(&settings.pricing)?);
        let prices = crate::pricing::PriceBook::new(price_table.clone(), &config, &file.prices);
        let policies = Arc::new(policies);
        let runtime =
            Runtime { provider: Provider::new(&config)?, keys: KeyTable::new(&config), prices, config, file, policies };
        let cache = cache::ResponseCache::new(&settings.cache, shared.clone());
        let sso = settings.access.sso.clone().map(sso::Sso::new).transpose()?;
        Ok(Gateway {
            settings,
            base,
            runtime: ArcSwap::from_pointee(runtime),
            plugins,
            scheduler,
            state,
            metrics,
            in_flight,
            paused: Default::default(),
            edits: tokio::sync::Mutex::new(()),
            notices: Notices::default(),
            detected: Default::default(),
            shared,
            auth_failures: Default::default(),
            stored_budget: Default::default(),
            price_table,
            cache,
            staged_policies: Default::default(),
            sso,
        })
    }

    /// Pauses (`true`) or resumes serving `/v1` requests; those in flight finish either way.
    pub fn set_paused(&self, paused: bool) {
        if self.paused.is_on() != paused {
            tracing::info!(paused, "serving {}", if paused { "paused by the operator" } else { "resumed" });
        }
        self.paused.set(paused);
    }

    /// Whether `/v1` requests are refused by the operator's pause.
    pub fn paused(&self) -> bool {
        self.paused.is_on()
    }

    /// The current runtime: what one request sees from start to end.
    pub fn runtime(&self) -> Arc<Runtime> {
        self.runtime.load_full()
    }

    /// Changes the runtime file through `change`, checks the result like config.yaml, writes it
    /// (atomically) and swaps it in; in-flight requests finish on the runtime they started with.
    pub async fn edit<T>(
        &self,
        change: impl FnOnce(&mut RuntimeFile, &Config) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let _one_at_a_time = self.edits.lock().await;
        let current = self.runtime();
        let mut file = current.file.clone();
        let out = change(&mut file, &current.config)?;
        // What the other replicas get, once this one has it in use.
        let shared = self.shared.as_ref().map(|shared| (shared, runtime_yaml(&file)));
        self.put_in_use(&current, file).map_err(|refused| match refused {
            Refused::Invalid(errors) => {
                let list: Vec<String> =
                    errors.iter().map(|e| format!("{}: {} (fix: {})", e.path, e.message, e.fix)).collect();
                ApiError::invalid_request(format!("the change was not made: {}", list.join("; ")))
                    .code("invalid_change")
            }
            Refused::Write(e) => internal(format!("cannot write {}: {e}", self.settings.runtime_file.display())),
            Refused::Install(e) => e,
        })?;
        audit::edited(&current, &self.runtime());
        if let Some((shared, yaml)) = shared {
            shared.publish_runtime(yaml);
        }
        Ok(out)
    }

    /// A runtime file another replica made (`shared_state`): checked as an admin edit is,
    /// written and put in use; not sent on again.
    pub async fn adopt_runtime(&self, yaml: &str) -> Result<(), String> {
        let file: RuntimeFile = serde_yaml::from_str(yaml).map_err(|e| format!("not a runtime file: {e}"))?;
        // Policies it defines with components this replica does not run yet are loaded first
        // (a built-in, or a file at the same path: an uploaded component stays on its replica).
        let sandbox = self.settings.sandbox.limits(self.settings.body_limit_bytes);
        let current = self.runtime();
        for config in crate::config::merge(&self.base, &file).policies.iter().filter(|p| !current.policies.runs(p)) {
            let plugin = policy::load_component(&self.plugins, config, &sandbox, &self.settings.data_dir).await?;
            self.stage_policy(config.name.clone(), plugin);
        }
        let _one_at_a_time = self.edits.lock().await;
        let current = self.runtime();
        if runtime_yaml(&current.file) == runtime_yaml(&file) {
            return Ok(());
        }
        self.put_in_use(&current, file).map_err(|refused| match refused {
            Refused::Invalid(errors) => {
                errors.iter().map(|e| format!("{}: {}", e.path, e.message)).collect::<Vec<_>>().join("; ")
            }
            Refused::Write(e) => format!("cannot write {}: {e}", self.settings.runtime_file.display()),
            Refused::Install(e) => e.message.to_string(),
        })
    }

    /// Checks `file` as config.yaml is checked, writes it (atomically) and swaps it in: one
    /// path for an admin edit and for a file another replica made.
    fn put_in_use(&self, current: &Runtime, file: RuntimeFile) -> Result<(), Refused> {
        let names = self.plugins.names();
        let names: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
        let config = crate::config::with_runtime(&self.base, &file, &names).map_err(Refused::Invalid)?;
        write_runtime_file(&self.settings.runtime_file, &file).map_err(Refused::Write)?;
        self.install(current, config, file).map_err(Refused::Install)
    }

    /// Starts exchanging state with the other replicas (`shared_state`); serving only, so
    /// `check` stays offline.
    pub fn start_shared(self: &Arc<Self>) {
        if let Some(shared) = &self.shared {
            let me: Arc<dyn crate::shared::Replica> = self.clone();
            shared.start(Arc::downgrade(&me));
            tracing::info!(replica = %crate::logsafe::Escaped(shared.replica()), "sharing state with the other replicas through Redis");
        }
    }

    /// Before serving: refuses to start under a replica name another live replica holds.
    pub async fn claim_replica_name(&self) -> Result<(), String> {
        match &self.shared {
            Some(shared) => shared.claim_name_at_start().await,
            None => Ok(()),
        }
    }

    /// At shutdown: sends what this replica counted since its last exchange (one sync, a
    /// second at most), so the others do not lose its last requests' tokens.
    pub async fn stop_shared(self: &Arc<Self>) {
        if let Some(shared) = &self.shared {
            let me: Arc<dyn crate::shared::Replica> = self.clone();
            shared.last_sync(me.as_ref()).await;
        }
    }

    /// Holds `plugin` for the next change that defines policy `name` with it (an upload is
    /// loaded before the edit that puts it in use, which cannot wait on a compile).
    pub fn stage_policy(&self, name: crate::config::PolicyName, plugin: Arc<crate::plugin::PolicyPlugin>) {
        self.staged_policies.lock().unwrap_or_else(|p| p.into_inner()).insert(name, plugin);
    }

    /// Swaps in a runtime for `config` (the detected models added) and `file`.
    fn install(&self, current: &Runtime, config: Config, file: RuntimeFile) -> Result<(), ApiError> {
        let config = self.detected.lock().expect("detected models").apply(config);
        let provider = current.provider.rebuild(&config).map_err(|e| internal(e.to_string()))?;
        self.plugins.size_pools(&config);
        let keys = KeyTable::new(&config);
        self.scheduler.set_selection(config.channel_selection);
        let prices = crate::pricing::PriceBook::new(self.price_table.clone(), &config, &file.prices);
        let policies = if config.policies == current.config.policies {
            Arc::clone(&current.policies)
        } else {
            let staged = std::mem::take(&mut *self.staged_policies.lock().unwrap_or_else(|p| p.into_inner()));
            let rebuilt = current.policies.rebuild(&config.policies, &staged);
            Arc::new(rebuilt.map_err(|e| ApiError::invalid_request(format!("the change was not made: policy {e}")))?)
        };
        self.runtime.store(Arc::new(Runtime { config, file, provider, keys, prices, policies }));
        Ok(())
    }

    /// The current runtime again, with the detected models as they are now.
    async fn reinstall(&self) {
        let _one_at_a_time = self.edits.lock().await;
        let current = self.runtime();
        let names = self.plugins.names();
        let names: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
        match crate::config::with_runtime(&self.base, &current.file, &names) {
            Ok(config) => {
                if let Err(e) = self.install(&current, config, current.file.clone()) {
                    tracing::warn!("detected models not put in use: {}", e.message);
                }
            }
            Err(errors) => {
                tracing::warn!("detected models not put in use: the config no longer checks ({} errors)", errors.len())
            }
        }
    }

    /// Records an attempt: its metrics, and its request-log row (journaled when this returns).
    pub fn log(&self, row: LogRow, context: &books::LogContext) {
        self.log_charged(row, context, Vec::new());
    }

    /// Logs an attempt whose cost is charged to `charges` (budgets) in the same write.
    pub fn log_charged(&self, row: LogRow, context: &books::LogContext, charges: Vec<crate::state::Charge>) {
        if self.settings.metrics.enabled {
            self.observe(&row, context);
        }
        self.state.log_charged(row, charges);
    }

    fn observe(&self, row: &LogRow, context: &books::LogContext) {
        // The adapter's protocol, by the source's adapter (a guard, not a clone, of the runtime).
        let runtime = self.runtime.load();
        let adapter = runtime
            .config
            .sources
            .iter()
            .find(|s| s.name.as_str() == row.source)
            .and_then(|s| self.plugins.adapter(&s.adapter));
        self.metrics.observe(row, context, adapter.as_ref().map_or("", |a| a.metadata().protocol.as_str()));
    }

    /// A router with `/metrics` alone (for `metrics.listen`).
    pub fn metrics_router(self: &Arc<Self>) -> Router {
        Router::new().route("/metrics", get(metrics::scrape_own_listener)).with_state(self.clone())
    }
}

/// Why a runtime file was not put in use.
enum Refused {
    Invalid(Vec<crate::config::FieldError>),
    Write(std::io::Error),
    Install(ApiError),
}

fn internal(message: String) -> ApiError {
    ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, ErrorType::Api, message)
}

/// A runtime file as the replicas exchange it.
fn runtime_yaml(file: &RuntimeFile) -> String {
    serde_yaml::to_string(file).unwrap_or_default()
}

impl crate::shared::Replica for Gateway {
    fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    fn watched(&self) -> crate::shared::Watched {
        let runtime = self.runtime();
        let config = &runtime.config;
        let mut watched = crate::shared::Watched::default();
        for source in &config.sources {
            if source.rpm.is_some() {
                watched.rpm.push(source.name.clone());
            }
            for model in &source.models {
                let slot = crate::domain::SlotKey { source: source.name.clone(), model: model.name.clone() };
                for period in crate::router::quota_periods(config, &slot) {
                    watched.slots.push((slot.clone(), period));
                }
            }
        }
        let keys = config.keys.iter().cloned().chain(config.runtime_keys.iter().map(|k| k.as_key_config()));
        for k in keys {
            if let Some(q) = k.quota() {
                watched.keys.push((crate::domain::Account::Tokens(k.name.clone()), q.period));
            }
            if let Some(b) = k.budget {
                watched.keys.push((crate::domain::Account::KeyUsd(k.name.clone()), b.period));
            }
        }
        for b in &config.budgets {
            watched.keys.push((crate::domain::Account::GroupUsd(b.group.clone()), b.period));
        }
        watched
    }

    fn runtime_yaml(&self) -> String {
        runtime_yaml(&self.runtime().file)
    }

    fn adopt_runtime(&self, yaml: String) -> futures::future::BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { Gateway::adopt_runtime(self, &yaml).await })
    }

    fn install_adapter(&self, name: String, bytes: Vec<u8>) -> futures::future::BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            if let Some(policy) = name.strip_prefix(admin::policies::REPLICATED) {
                return admin::policies::install_replicated(self, policy, &bytes).await;
            }
            let name = admin::adapters::checked_name(&name).map_err(|e| e.message.to_string())?;
            admin::adapters::install(self, &name, &bytes, admin::adapters::Naming::PathWins)
                .await
                .map(|_| ())
                .map_err(|e| e.message.to_string())
        })
    }

    fn remove_adapter(&self, name: &str) -> Result<(), String> {
        if let Some(policy) = name.strip_prefix(admin::policies::REPLICATED) {
            // The runtime file stops naming it too; the file is only let go.
            let _ = std::fs::remove_file(crate::config::uploaded_file(&self.settings.data_dir, policy));
            return Ok(());
        }
        let name = admin::adapters::checked_name(name).map_err(|e| e.message.to_string())?;
        admin::adapters::remove(self, &name).map_err(|e| e.message.to_string())
    }

    fn adopt_audit(&self, entry: crate::access::AuditEntry) {
        self.state.audit(entry.bounded());
    }
}

/// Writes the runtime file whole: a temporary file beside it, synced, then renamed over it, so
/// a crash leaves the old file or the new one, never half of one.
fn write_runtime_file(path: &std::path::Path, file: &RuntimeFile) -> std::io::Result<()> {
    use std::io::Write;
    let text = format!(
        "# Written by switchyard (admin API / WebUI); edit while the gateway is stopped.\n{}",
        serde_yaml::to_string(file).map_err(std::io::Error::other)?
    );
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut out = crate::private_fs::open(&tmp, false)?;
    out.write_all(text.as_bytes())?;
    out.sync_all()?;
    std::fs::rename(&tmp, path)
}

pub fn router(gateway: Arc<Gateway>) -> Router {
    let in_flight = gateway.in_flight.clone();
    let metrics_here = gateway.settings.metrics.enabled && gateway.settings.metrics.listen.is_none();
    let app = Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions).layer(envelope::layer(FrontDoor::OPENAI)))
        .route("/v1/messages", post(messages::messages).layer(envelope::layer(messages::ANTHROPIC)))
        .route("/v1/messages/count_tokens", post(messages::count_tokens).layer(envelope::layer(messages::ANTHROPIC)))
        .route("/v1/responses", post(responses::responses).layer(envelope::layer(FrontDoor::OPENAI)))
        .route(
            "/v1/responses/{id}",
            get(responses::retrieve).delete(responses::delete).layer(envelope::layer(FrontDoor::OPENAI)),
        )
        .route("/v1/embeddings", post(embeddings::embeddings).layer(envelope::layer(FrontDoor::OPENAI)))
        .route("/v1/images/generations", post(images::images).layer(envelope::layer(FrontDoor::OPENAI)))
        .route("/v1/models", get(models::list_models))
        .route_layer(inflight::layer(in_flight, gateway.paused.clone()))
        .route_layer(client_metrics::layer(gateway.clone()));
    let app = if metrics_here { app.route("/metrics", get(metrics::scrape)) } else { app };
    app.route("/health", get(models::health))
        .merge(admin::router(gateway.clone()))
        .merge(webui::router())
        .merge(sso::router())
        .fallback(not_found)
        .with_state(gateway)
}

/// An unknown path: in Anthropic's error shape under `/v1/messages` (its clients read only
/// that), OpenAI's elsewhere.
async fn not_found(uri: axum::http::Uri) -> axum::response::Response {
    let error = ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        ErrorType::InvalidRequest,
        format!("no route for {}", uri.path()),
    )
    .code("unknown_url");
    if uri.path().starts_with("/v1/messages") { messages::error_response(error) } else { error.into_response() }
}

#[cfg(test)]
mod golden;
