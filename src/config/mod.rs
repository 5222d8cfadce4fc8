//! `config.yaml`: the typed configuration, and loading it with `${VAR}` expansion and
//! validation that reports every error with file, line, field and fix.

mod access;
mod cache;
mod env;
mod error;
mod load;
mod locate;
mod policies;
mod prices;
mod routes;
mod runtime;
mod values;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::domain::{AdapterName, ChannelSelection, GroupName, KeyName, PolicyName, Secret, SourceName, mask};
pub use access::{AccessConfig, AdminTokenRecord, RoleRule, SsoConfig};
pub use cache::{CacheConfig, MAX_CACHE_TTL_SECONDS, SemanticConfig};
pub use env::expand as expand_env;
pub use error::{ConfigError, FieldError};
pub use load::{LoadedConfig, load, load_runtime_str, load_str, with_runtime};
pub use policies::{BUILTIN_POLICY_NAMES, OnError, PolicyConfig, UPLOADED, uploaded_file};
pub use prices::{GroupBudget, PriceOverride, PricingConfig, TierConfig};
pub use routes::{FusionConfig, FusionStrategy, RouteConfig, RouteMode, RouteProvider, VisionConfig, VisionFallback};
pub use runtime::{AutoChains, ChainSlot, RuntimeFile, RuntimeKey, SlotConfig, SourceTemplate, merge};
pub use values::{BaseUrl, InRange, MAX_SECONDS, Ratio, Seconds, WaitSeconds, WholeSeconds};

use crate::domain::{
    AdapterGrant, AffinityPolicy, Budget, CooldownPolicy, Period, PeriodName, Quota, SandboxLimits, ScoringPolicy,
};

/// What only a restart changes: addresses, directories, limits, policies and integrations.
/// Loaded once; config.yaml's catalog and every runtime catalog share it.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub admin_token: AdminToken,
    pub data_dir: PathBuf,
    pub adapter_dir: PathBuf,
    /// Compiled-component cache; `None` means `data_dir/cache`.
    pub cache_dir: Option<PathBuf>,
    /// Largest client request body.
    pub body_limit_bytes: usize,
    pub sandbox: SandboxConfig,
    /// Limits on client connections and requests.
    pub server: ServerLimits,
    pub cooldown: CooldownPolicy,
    /// What an unknown model falls back to (`AUTO`: the AUTO chain).
    pub default_model: Option<String>,
    /// The file the WebUI edits: AUTO chains (read at start).
    pub runtime_file: PathBuf,
    /// `priority` ordering: requested model (or `*`) → sources, first preferred.
    pub priority_orders: BTreeMap<String, Vec<SourceName>>,
    pub scoring: ScoringPolicy,
    pub affinity: AffinityPolicy,
    /// Per-adapter permissions (`adapters.NAME.allow_hosts`).
    pub adapters: BTreeMap<AdapterName, AdapterPolicy>,
    /// Request logs older than this are deleted (at start); `None` or 0 keeps them.
    pub log_retention_days: Option<u32>,
    /// Stored Responses (`store: true`) older than this are deleted; `None` or 0 keeps them.
    pub response_retention_days: Option<u32>,
    /// Bounds on what `/v1/responses` stores.
    pub stored_responses: StoredResponsesConfig,
    /// How the process logs to stderr.
    pub log_format: LogFormat,
    /// Whether each answered or refused request writes a line to stderr (`switchyard::access`);
    /// off by default: the request log already keeps every request, and at full load the line
    /// and its span cost ~9 % of the CPU (docs/performance.md).
    pub access_log: bool,
    /// OTLP trace export; off when left out.
    pub telemetry: Option<TelemetryConfig>,
    /// `GET /metrics`.
    pub metrics: MetricsConfig,
    /// The operators' Telegram bot; off when left out.
    pub telegram: Option<TelegramConfig>,
    /// Replicas sharing their state through Redis; each process alone when left out.
    pub shared_state: Option<SharedStateConfig>,
    /// Where prices come from, and whether costs and budgets are kept.
    pub pricing: PricingConfig,
    /// Personal tokens' longest life, the audit trail's retention, the bot's role.
    pub access: AccessConfig,
    /// The response cache's bounds and sharing.
    pub cache: CacheConfig,
    /// Policy plugins, in the order they run at each place (global, key, route, source).
    pub policies: Vec<PolicyConfig>,
}

/// The configuration in use: the settings, and the catalog the admin API, the WebUI and the
/// runtime file change while the gateway runs (keys, sources, routes, AUTO chains, mode).
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: Arc<Settings>,
    pub channel_selection: ChannelSelection,
    pub keys: Vec<KeyConfig>,
    pub sources: Vec<SourceConfig>,
    /// Aliases with a processing mode.
    pub routes: Vec<RouteConfig>,
    /// The AUTO chains from `runtime_file`.
    pub auto: AutoChains,
    /// Keys created at run time (their secrets' digests); `keys` holds config.yaml's.
    pub runtime_keys: Vec<RuntimeKey>,
    /// Templates for new sources.
    pub source_templates: Vec<SourceTemplate>,
    /// Prices the operator set (config.yaml's, then the runtime file's).
    pub prices: Vec<PriceOverride>,
    /// USD budgets of route groups.
    pub budgets: Vec<GroupBudget>,
    /// Policies: config.yaml's (`settings.policies`) with the runtime file's over them by name.
    pub policies: Vec<PolicyConfig>,
}

/// `body_limit_mb` when the config leaves it out.
pub const DEFAULT_BODY_LIMIT_MB: u64 = 32;

/// `adapters.NAME`: what the operator lets one adapter do beyond translating, and limits of
/// its own where it needs other than `sandbox:` gives every adapter.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterPolicy {
    /// Hosts its `http_get` / `http_post` (the host `fetch` import) may reach; none by default.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    pub memory_mb: Option<u32>,
    pub cpu_ms_per_call: Option<u64>,
    pub wall_ms_per_call: Option<u64>,
    /// Most instances its pool keeps (each holds its memory while idle).
    pub max_instances: Option<u32>,
    /// Sessions one instance hosts at once (default `sandbox.sessions_per_instance`).
    pub sessions_per_instance: Option<u32>,
}

impl AdapterPolicy {
    pub fn grant(&self) -> AdapterGrant {
        AdapterGrant {
            allow_hosts: self.allow_hosts.clone(),
            memory_bytes: self.memory_mb.map(|mb| (mb as usize) << 20),
            cpu_per_call: self.cpu_ms_per_call.map(Duration::from_millis),
            wall_per_call: self.wall_ms_per_call.map(Duration::from_millis),
            max_instances: self.max_instances.map(|n| n as usize),
            sessions_per_instance: self.sessions_per_instance.map(|n| n as usize),
        }
    }
}

/// The user's cache of compiled components (`$XDG_CACHE_HOME/switchyard`, else
/// `~/.cache/switchyard`): the gateway and the author's tools share it, keyed by the bytes and
/// the engine, so what one compiled the other loads.
pub fn user_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").filter(|home| !home.is_empty()).map(|home| PathBuf::from(home).join(".cache"))
    })?;
    base.is_absolute().then(|| base.join("switchyard"))
}

/// `stored_responses:` — what the Responses door keeps for `previous_response_id`, bounded so
/// that a few cheap requests cannot fill the disk.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoredResponsesConfig {
    /// The largest turn (its input and output items, and the response object) stored, in KiB.
    pub max_turn_kb: u64,
    /// What one key may store per day (UTC), in MiB; past it, its turns are not stored.
    pub max_mb_per_key_per_day: u64,
}

impl Default for StoredResponsesConfig {
    fn default() -> Self {
        StoredResponsesConfig { max_turn_kb: 1024, max_mb_per_key_per_day: 100 }
    }
}

impl StoredResponsesConfig {
    pub fn max_turn_bytes(&self) -> u64 {
        self.max_turn_kb << 10
    }

    pub fn max_bytes_per_key_per_day(&self) -> u64 {
        self.max_mb_per_key_per_day << 20
    }
}

/// `metrics:` — the Prometheus endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Off: nothing is observed and `/metrics` is 404.
    pub enabled: bool,
    /// Serve `/metrics` on this address instead of the main listener, to scrapers without a
    /// token (unless `token` is set); the only way to scrape without one.
    pub listen: Option<SocketAddr>,
    /// A bearer token for scrapers (the admin token works too); required on the main listener.
    pub token: Option<Secret>,
    /// `Host` names a tokenless scrape on `listen` may use besides IP literals and `localhost`
    /// (a page that rebinds its own name to this address sends its name).
    pub hosts: Vec<String>,
    /// Label sets each family written per request may hold; new ones past it go to `other`.
    pub max_label_sets: InRange<1, 10_000>,
}

/// Label sets per family unless `metrics.max_label_sets` says otherwise.
pub const DEFAULT_MAX_LABEL_SETS: InRange<1, 10_000> = InRange::new(500);

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            listen: None,
            token: None,
            hosts: Vec::new(),
            max_label_sets: DEFAULT_MAX_LABEL_SETS,
        }
    }
}

/// `telegram:` — a bot operators command from a chat, and where alerts go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// From BotFather; part of every Bot API URL, so it is masked wherever a URL is logged.
    pub bot_token: Secret,
    /// Chats (users or groups) the bot answers and alerts; everyone else is ignored.
    pub allowed_chats: Vec<i64>,
    /// When set, only these people (Telegram user ids) may command the bot, in any allowed
    /// chat; empty: every member of an allowed chat is an operator.
    #[serde(default)]
    pub allowed_users: Vec<i64>,
    #[serde(default = "default_telegram_api")]
    pub api_base: BaseUrl,
    /// How long one `getUpdates` long poll waits for news.
    #[serde(default = "default_poll_timeout")]
    pub poll_timeout_seconds: InRange<1, 50>,
    /// How often alerts are looked for.
    #[serde(default = "default_alert_check")]
    pub alert_check_seconds: InRange<1, 3600>,
}

fn default_telegram_api() -> BaseUrl {
    BaseUrl::try_from("https://api.telegram.org".to_string()).expect("an https URL")
}

fn default_poll_timeout() -> InRange<1, 50> {
    InRange::new(30)
}

fn default_alert_check() -> InRange<1, 3600> {
    InRange::new(5)
}

/// `shared_state:` — replicas share cooldowns, probes, rpm, quotas, affinity and runtime
/// edits through Redis. Written as a URL alone or as a block.
#[derive(Debug, Clone)]
pub struct SharedStateConfig {
    /// `redis://[user:password@]host:port/db` or `rediss://` (TLS).
    pub url: Secret,
    /// This process's name among the replicas (log rows, events); the host name by default.
    pub replica: String,
    /// How often a replica sends its changes and reads the others' counters.
    pub sync: Duration,
    /// Whether requests that spend a quota are served while Redis is unreachable.
    pub quotas_when_down: FailMode,
    /// Put before every Redis name, so several gateways can share one Redis.
    pub prefix: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// Served, counted locally (a quota may be overrun by what other replicas spend meanwhile).
    #[default]
    Open,
    /// Refused with 503 until Redis answers again.
    Closed,
}

/// `shared_state:` as written.
#[derive(Debug)]
pub(crate) enum SharedStateWritten {
    Url(Secret),
    Block(SharedStateBlock),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SharedStateBlock {
    pub url: Secret,
    pub replica: Option<String>,
    pub sync_ms: Option<InRange<20, 1000>>,
    #[serde(default)]
    pub quotas_when_down: FailMode,
    pub prefix: Option<String>,
}

/// `telemetry:` — spans exported to an OpenTelemetry collector over OTLP/HTTP.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP address, e.g. `http://127.0.0.1:4318` (`/v1/traces` is added).
    pub otlp_endpoint: BaseUrl,
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// Share of traces kept (a client's sampled `traceparent` is followed as it says).
    #[serde(default = "default_sample_ratio")]
    pub sample_ratio: Ratio,
}

fn default_service_name() -> String {
    "switchyard".into()
}

fn default_sample_ratio() -> Ratio {
    Ratio::ONE
}

/// `admin_token`: left out or `auto`, the gateway keeps one of its own in `data_dir`;
/// explicitly empty, the admin API and the WebUI are off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminToken {
    Off,
    /// To be read from (or generated into) `data_dir/admin_token` at start.
    Auto,
    Given(Secret),
    /// Read from or generated into this file at start.
    Stored(Secret, PathBuf),
}

impl AdminToken {
    pub fn secret(&self) -> Option<&Secret> {
        match self {
            AdminToken::Given(s) | AdminToken::Stored(s, _) => Some(s),
            AdminToken::Off | AdminToken::Auto => None,
        }
    }
}

impl Settings {
    /// Where an `auto` admin token is kept.
    pub fn admin_token_file(&self) -> PathBuf {
        self.data_dir.join("admin_token")
    }

    pub fn state_db(&self) -> PathBuf {
        self.data_dir.join("state.db")
    }

    /// `cache_dir`, else the user's cache (shared with the author's tools on this machine),
    /// else `data_dir/cache`.
    pub fn component_cache_dir(&self) -> PathBuf {
        self.cache_dir.clone().or_else(user_cache_dir).unwrap_or_else(|| self.data_dir.join("cache"))
    }

    /// Sessions one instance of `adapter` hosts.
    pub fn sessions_per_instance(&self, adapter: &AdapterName) -> usize {
        let own = self.adapters.get(adapter).and_then(|p| p.sessions_per_instance);
        own.unwrap_or(self.sandbox.sessions_per_instance) as usize
    }

    /// What the operator grants each adapter named under `adapters:`.
    pub fn adapter_grants(&self) -> std::collections::HashMap<AdapterName, AdapterGrant> {
        self.adapters.iter().map(|(name, policy)| (name.clone(), policy.grant())).collect()
    }
}

impl Config {
    /// The route `alias` names for keys of `group`.
    pub fn route(&self, group: &GroupName, alias: &str) -> Option<&RouteConfig> {
        self.routes.iter().find(|r| &r.group == group && r.alias == alias)
    }

    pub fn source(&self, name: &SourceName) -> Option<&SourceConfig> {
        self.sources.iter().find(|s| &s.name == name)
    }

    /// Sessions an adapter's pool may hold at once: its sources' summed `max_concurrent`,
    /// within what the adapter's own `max_instances` can host.
    pub fn adapter_concurrency(&self, adapter: &AdapterName) -> usize {
        let wanted: usize =
            self.sources.iter().filter(|s| &s.adapter == adapter).map(|s| s.max_concurrent as usize).sum();
        let settings = &self.settings;
        match settings.adapters.get(adapter).and_then(|p| p.max_instances) {
            Some(cap) => wanted.min((cap as usize).saturating_mul(settings.sessions_per_instance(adapter))),
            None => wanted,
        }
    }
}

/// `log_format:` — text lines for people, or one JSON object a line for log collectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `server:` — what one client (or many) may hold of the gateway: open connections, requests
/// in flight, and how long it may take to send a request's head and body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerLimits {
    /// Open client connections; past it a new one gets 503 and is closed.
    pub max_connections: u32,
    /// Requests being served at once (streams until their end); past it 503 with Retry-After.
    pub max_in_flight: u32,
    /// Time a client has to send a request's headers (slowloris).
    pub header_timeout_seconds: Seconds,
    /// Time a client has to send a request's whole body, once its headers are in.
    pub body_timeout_seconds: Seconds,
    /// A connection with no request in flight for this long is closed (keep-alive idle); a new
    /// one must start its first request within `header_timeout_seconds`.
    pub idle_timeout_seconds: Seconds,
    /// Requests one HTTP/2 connection may have open at once (its streams); `max_in_flight`
    /// still bounds them all.
    pub http2_max_streams: u32,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 10_000,
            max_in_flight: 10_000,
            header_timeout_seconds: Seconds::from_secs(10),
            body_timeout_seconds: Seconds::from_secs(60),
            idle_timeout_seconds: Seconds::from_secs(75),
            http2_max_streams: 200,
        }
    }
}

impl ServerLimits {
    pub fn header_timeout(&self) -> Duration {
        self.header_timeout_seconds.duration()
    }

    pub fn body_timeout(&self) -> Duration {
        self.body_timeout_seconds.duration()
    }

    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout_seconds.duration()
    }
}

/// `sandbox:` — limits for every adapter instance.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Memory cap per instance; by default derived from `body_limit_mb` so that any body the
    /// gateway accepts can be translated.
    pub memory_mb: Option<u32>,
    pub cpu_ms_per_call: u64,
    /// Wall-clock bound of one adapter call, `fetch` waits included.
    pub wall_ms_per_call: u64,
    pub max_output_mb: u32,
    pub pool_slots: u32,
    /// Requests in flight one adapter instance hosts; their guest calls take turns.
    pub sessions_per_instance: u32,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        let d = SandboxLimits::default();
        SandboxConfig {
            memory_mb: None,
            cpu_ms_per_call: d.cpu_per_call.as_millis() as u64,
            wall_ms_per_call: d.wall_per_call.as_millis() as u64,
            max_output_mb: (d.max_output_bytes >> 20) as u32,
            pool_slots: d.pool_slots,
            sessions_per_instance: d.sessions_per_instance as u32,
        }
    }
}

impl SandboxConfig {
    /// The limits for a gateway that accepts request bodies up to `body_limit_bytes`.
    pub fn limits(&self, body_limit_bytes: usize) -> SandboxLimits {
        SandboxLimits {
            memory_bytes: self.memory_mb.map_or_else(
                || SandboxLimits::memory_to_translate(body_limit_bytes).max(64 << 20),
                |mb| (mb as usize) << 20,
            ),
            cpu_per_call: Duration::from_millis(self.cpu_ms_per_call),
            wall_per_call: Duration::from_millis(self.wall_ms_per_call),
            max_output_bytes: (self.max_output_mb as usize) << 20,
            pool_slots: self.pool_slots,
            sessions_per_instance: self.sessions_per_instance as usize,
        }
    }
}

/// A gateway key clients send as `Authorization: Bearer`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    pub name: KeyName,
    pub key: Secret,
    /// Model scope: exact names, `source/model`, `*`, or a trailing-`*` prefix.
    pub models: Vec<String>,
    /// The route group whose routes this key sees.
    #[serde(default)]
    pub group: GroupName,
    /// Tokens this key may use per `period`; unset = unlimited.
    #[serde(default)]
    pub token_quota: Option<u64>,
    #[serde(default)]
    pub period: PeriodName,
    #[serde(default)]
    pub hours: Option<u32>,
    /// USD this key may spend per period; unset = no limit.
    #[serde(default)]
    pub budget: Option<Budget>,
    /// Whether this key's answers are cached (over its routes' and sources' say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<bool>,
    /// Policies (`policies[].name`) this key's requests pass, after the global ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<PolicyName>,
}

impl KeyConfig {
    /// The key's token quota, when it has one (and its period is complete).
    pub fn quota(&self) -> Option<Quota> {
        let tokens = self.token_quota.filter(|t| *t > 0)?;
        Some(Quota { tokens, period: Period::from_config(self.period, self.hours)? })
    }
}

/// One upstream endpoint + account.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    pub name: SourceName,
    pub base_url: BaseUrl,
    #[serde(default, serialize_with = "crate::domain::expose_secret")]
    pub api_key: Secret,
    #[serde(default = "default_adapter")]
    pub adapter: AdapterName,
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent: u32,
    /// Longest wait for a place under `max_concurrent` before the next candidate is tried.
    #[serde(default = "default_queue_timeout_seconds")]
    pub queue_timeout_seconds: WaitSeconds,
    /// Whole request (non-streaming: its head comes only with the whole answer).
    #[serde(default = "default_timeout_seconds")]
    pub timeout_seconds: WholeSeconds,
    #[serde(default = "default_connect_timeout_seconds")]
    pub connect_timeout_seconds: WholeSeconds,
    /// Longest silence between two stream events before the stream is cut.
    #[serde(default = "default_idle_timeout_seconds")]
    pub idle_timeout_seconds: Seconds,
    /// Time from sending a streaming request to its first event (providers send the head at
    /// once, so it counts to the first event); 60 s by default.
    #[serde(default)]
    pub first_byte_timeout_seconds: Option<Seconds>,
    /// Whole stream, first byte to last.
    #[serde(default = "default_stream_timeout_seconds")]
    pub stream_timeout_seconds: Seconds,
    /// Requests per minute this source accepts; unset = no limit.
    #[serde(default)]
    pub rpm: Option<u32>,
    /// Which HTTP the gateway speaks to the upstream.
    #[serde(default, skip_serializing_if = "HttpVersion::is_auto")]
    pub http_version: HttpVersion,
    /// Adapter settings, passed to the adapter as they are (e.g. `header.X-Org: acme`).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    pub models: Vec<ModelConfig>,
    /// Ask the upstream's model list at start (and on the admin API's detect): what it lists
    /// joins `models` as chat models.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub detect_models: bool,
    /// A chat request that asks for a whole answer is sent upstream as a stream and put back
    /// together, so the first-byte and idle timeouts bound an upstream's silence (off: sent as
    /// asked, bounded by `timeout_seconds` only).
    #[serde(default = "enabled_by_default", skip_serializing_if = "is_enabled")]
    pub stream_whole_answers: bool,
    /// Whether answers from this source are cached when neither the key nor the route says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<bool>,
    /// Policies (`policies[].name`) a request passes before it goes to this source, and its
    /// answer on the way back; a policed request is always translated (never passed through).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<PolicyName>,
    /// What a native pass-through forwards beyond the ordinary fields and betas.
    #[serde(default, skip_serializing_if = "PassthroughConfig::is_default")]
    pub passthrough: PassthroughConfig,
    /// A detected model that another source is configured to serve joins plain-name routing
    /// too (off: it is reached only as `source/model`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub detect_models_share_names: bool,
    /// An operator's switch: a disabled source keeps its place but serves nothing.
    #[serde(default = "enabled_by_default", skip_serializing_if = "is_enabled")]
    pub enabled: bool,
}

/// A source's `http_version:`. HTTP/2 carries every request to the source on one connection
/// (up to the upstream's stream limit, then they queue), HTTP/1.1 opens one per request in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpVersion {
    /// HTTP/2 where the upstream's TLS offers it, HTTP/1.1 otherwise (plain `http://`).
    #[default]
    Auto,
    /// HTTP/1.1 only, for upstreams whose HTTP/2 misbehaves.
    Http1,
    /// HTTP/2 only; over plain `http://` with prior knowledge (h2c), as vLLM or Envoy behind
    /// a private network take it.
    Http2,
}

impl HttpVersion {
    fn is_auto(&self) -> bool {
        *self == HttpVersion::Auto
    }
}

fn enabled_by_default() -> bool {
    true
}

fn is_enabled(enabled: &bool) -> bool {
    *enabled
}

impl SourceConfig {
    pub fn timeout(&self) -> Duration {
        self.timeout_seconds.duration()
    }

    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout_seconds.duration()
    }

    pub fn queue_timeout(&self) -> Duration {
        self.queue_timeout_seconds.duration()
    }

    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout_seconds.duration()
    }

    pub fn model(&self, name: &str) -> Option<&ModelConfig> {
        self.models.iter().find(|m| m.name == name)
    }

    /// Time from sending a streaming request to its first event.
    pub fn first_byte_timeout(&self) -> Duration {
        self.first_byte_timeout_seconds.unwrap_or(DEFAULT_FIRST_BYTE_TIMEOUT).duration()
    }

    /// Longest a stream may run from start to end.
    pub fn stream_timeout(&self) -> Duration {
        self.stream_timeout_seconds.duration()
    }
}

/// A source's `passthrough:` — top-level fields, `anthropic-beta` flags and held-back tool
/// types a client may send through this source's native pass-through besides the ordinary
/// ones (`*`: any).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PassthroughConfig {
    pub fields: Vec<String>,
    pub betas: Vec<String>,
    pub tools: Vec<String>,
}

impl PassthroughConfig {
    pub fn is_default(&self) -> bool {
        self == &PassthroughConfig::default()
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// What clients ask for.
    pub name: String,
    /// What the upstream is sent; defaults to `name`.
    #[serde(default)]
    pub upstream: Option<String>,
    #[serde(default)]
    pub kind: ModelKind,
    /// Listed by the upstream (`detect_models`), not written in the config.
    #[serde(skip)]
    pub detected: bool,
    /// Reached only as `source/model`: a detected name another source is configured to serve
    /// (an upstream's list must not pull that model's traffic to itself).
    #[serde(skip)]
    pub qualified_only: bool,
}

impl ModelConfig {
    pub fn upstream_name(&self) -> &str {
        self.upstream.as_deref().unwrap_or(&self.name)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    #[default]
    Chat,
    Image,
    Embedding,
}

impl ModelKind {
    /// The OpenTelemetry GenAI operation name of a request for this kind of model.
    pub fn operation_name(self) -> &'static str {
        match self {
            ModelKind::Chat => "chat",
            ModelKind::Embedding => "embeddings",
            ModelKind::Image => "generate_content",
        }
    }
}

const DEFAULT_FIRST_BYTE_TIMEOUT: Seconds = Seconds::from_secs(60);

fn default_adapter() -> AdapterName {
    AdapterName::new("openai")
}
fn default_max_concurrent() -> u32 {
    10
}
fn default_queue_timeout_seconds() -> WaitSeconds {
    WaitSeconds::from_secs(10)
}
fn default_timeout_seconds() -> WholeSeconds {
    WholeSeconds::from_secs(120)
}
fn default_connect_timeout_seconds() -> WholeSeconds {
    WholeSeconds::from_secs(10)
}
fn default_idle_timeout_seconds() -> Seconds {
    Seconds::from_secs(60)
}
fn default_stream_timeout_seconds() -> Seconds {
    Seconds::from_secs(1800)
}
