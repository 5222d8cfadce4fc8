//! Reading config.yaml: YAML → `${VAR}` expansion → per-field typed parsing → semantic checks.
//! Every step collects errors instead of stopping at the first, so one run shows them all.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_yaml::{Mapping, Value};

use super::env::expand;
use super::error::{ConfigError, FieldError};
use super::locate::LineIndex;
use super::runtime::{AutoChains, ChainSlot, RuntimeFile, SlotConfig, merge};
use super::{
    AdminToken, ChannelSelection, Config, KeyConfig, KeyName, ModelKind, RouteConfig, RouteMode, SandboxConfig, Secret,
    Settings, SourceConfig, SourceName,
};
use crate::domain::{AUTO, AffinityPolicy, CooldownPolicy, Period, PeriodName, Quota, SandboxLimits, ScoringPolicy};

/// The longest timeout or window a setting may name (about 115 days): far past any real use,
/// and far from where adding it to a clock's instant would overflow.
const MAX_SECONDS: f64 = 10_000_000.0;

/// Whether `value` is a usable number of seconds: finite, not negative (zero only when
/// `zero_ok`), at most [`MAX_SECONDS`].
fn seconds(value: f64, zero_ok: bool) -> bool {
    value.is_finite() && value <= MAX_SECONDS && (value > 0.0 || zero_ok && value == 0.0)
}

/// The largest body_limit_mb: the sandbox memory it implies stays within wasm32's 4 GiB.
const MAX_BODY_LIMIT_MB: u64 = 256;

/// Nesting no config needs; past it the text is refused before any YAML parser sees it (they
/// recurse once per level: thousands of levels overflow the stack, and load in square time).
const MAX_NESTING: usize = 128;

/// Most sessions one adapter instance may host: past this, one slow call holds up too many.
const MAX_SESSIONS_PER_INSTANCE: u32 = 10_000;

/// An error when some line of `text` nests deeper than [`MAX_NESTING`]: indentation (two
/// spaces a level), compact block nodes (`- - -`, `? ? ?`) and open flow brackets, together.
fn too_deep(text: &str) -> Option<FieldError> {
    let mut flow = 0usize;
    for (n, line) in text.lines().enumerate() {
        let body = line.trim_start_matches([' ', '\t']);
        let indent = line.len() - body.len();
        let mut rest = body;
        let mut compact = 0;
        // Compact block nodes open a level each: sequence entries, explicit keys and values.
        while let Some(after) = ["- ", "-\t", "? ", "?\t", ": ", ":\t"].iter().find_map(|p| rest.strip_prefix(p)) {
            compact += 1;
            rest = after.trim_start();
        }
        let mut deepest = flow;
        let mut quote = None;
        for c in rest.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '[' | '{') => {
                    flow += 1;
                    deepest = deepest.max(flow);
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
        }
        if indent / 2 + compact + deepest > MAX_NESTING {
            return Some(FieldError {
                path: String::new(),
                line: Some(n + 1),
                message: format!("nests deeper than {MAX_NESTING} levels"),
                fix: "flatten the YAML: no setting nests this deep".into(),
            });
        }
    }
    None
}

/// The gateway key `config.example.yaml` falls back to: published, so for loopback only.
const EXAMPLE_KEY: &str = "sk-switchyard-dev-key";

/// The shortest admin or metrics token accepted where others can reach it.
const MIN_TOKEN_BYTES: usize = 24;

const TOP_LEVEL: &[&str] = &[
    "listen",
    "admin_token",
    "data_dir",
    "adapter_dir",
    "cache_dir",
    "body_limit_mb",
    "sandbox",
    "server",
    "cooldown",
    "default_model",
    "runtime_file",
    "channel_selection",
    "priority_orders",
    "scoring",
    "affinity",
    "log_retention_days",
    "response_retention_days",
    "log_format",
    "telemetry",
    "telegram",
    "shared_state",
    "metrics",
    "stored_responses",
    "adapters",
    "keys",
    "sources",
    "routes",
];

/// Loads `file`, expanding `${VAR}` from the process environment. `adapters` are the
/// adapter names that exist besides the `*.wasm` files in `adapter_dir`.
pub fn load(file: &Path, adapters: &[&str]) -> Result<LoadedConfig, ConfigError> {
    let text =
        std::fs::read_to_string(file).map_err(|source| ConfigError::Read { file: file.to_path_buf(), source })?;
    let base = load_str(&text, file, &|name| std::env::var(name).ok(), adapters)?;
    let runtime_file = base.settings.runtime_file.clone();
    match std::fs::read_to_string(&runtime_file) {
        Ok(text) => {
            let effective = load_runtime_str(&text, &runtime_file, &base, adapters)?;
            let (runtime, _) = parse_runtime(&text);
            Ok(LoadedConfig { base, runtime, effective })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(LoadedConfig { effective: base.clone(), base, runtime: RuntimeFile::default() })
        }
        Err(source) => Err(ConfigError::Read { file: runtime_file, source }),
    }
}

/// config.yaml, the runtime file, and the two merged (the two catalogs share one settings).
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub base: Config,
    pub runtime: RuntimeFile,
    pub effective: Config,
}

impl LoadedConfig {
    pub fn settings(&self) -> &Arc<Settings> {
        &self.base.settings
    }

    /// Changes a setting in the one copy both catalogs share.
    pub fn update_settings(&mut self, change: impl FnOnce(&mut Settings)) {
        let mut settings = Settings::clone(&self.base.settings);
        change(&mut settings);
        let settings = Arc::new(settings);
        self.effective.settings = Arc::clone(&settings);
        self.base.settings = settings;
    }
}

/// `base` with the runtime file `text` merged in; errors (of types and of meaning, all at
/// once) name the runtime file's lines.
pub fn load_runtime_str(text: &str, file: &Path, base: &Config, adapters: &[&str]) -> Result<Config, ConfigError> {
    if let Some(error) = too_deep(text) {
        return Err(ConfigError::Invalid { file: file.to_path_buf(), errors: vec![error] });
    }
    let (runtime, mut errors) = parse_runtime(text);
    match with_runtime(base, &runtime, adapters) {
        Ok(config) if errors.is_empty() => return Ok(config),
        Ok(_) => {}
        Err(more) => errors.extend(more),
    }
    let index = LineIndex::new(text);
    for e in &mut errors {
        e.line = e.line.or_else(|| index.line(&e.path));
    }
    errors.sort_by_key(|e| e.line.unwrap_or(0));
    Err(ConfigError::Invalid { file: file.to_path_buf(), errors })
}

/// The runtime file's text as its typed form, entry by entry, so one bad entry does not hide
/// the others (those that do not parse are left out, with an error each).
fn parse_runtime(text: &str) -> (RuntimeFile, Vec<FieldError>) {
    const KNOWN: &[&str] = &[
        "sources",
        "deleted_sources",
        "source_templates",
        "auto",
        "auto_image",
        "routes",
        "deleted_routes",
        "keys",
        "deleted_keys",
        "key_scopes",
        "channel_selection",
    ];
    let env = |_: &str| None;
    let mut c = Collector { index: LineIndex::new(text), errors: Vec::new(), env: &env, positions: Default::default() };
    let top = match serde_yaml::from_str::<Value>(text) {
        Ok(Value::Null) => Mapping::new(),
        Ok(Value::Mapping(top)) => top,
        Ok(_) => {
            c.error("", "the runtime file must be a mapping (auto:, routes:, ...)", "start from an empty file");
            Mapping::new()
        }
        Err(e) => {
            c.errors.push(FieldError {
                path: String::new(),
                line: e.location().map(|l| l.line()),
                message: format!("not valid YAML: {e}"),
                fix: "correct the YAML syntax on that line".into(),
            });
            Mapping::new()
        }
    };
    for key in top.keys().filter_map(Value::as_str).filter(|k| !KNOWN.contains(k)) {
        c.error(key, format!("unknown setting `{key}`"), format!("known settings: {}", KNOWN.join(", ")));
    }
    let runtime = RuntimeFile {
        sources: c.list(&top, "sources"),
        deleted_sources: c.field(&top, "deleted_sources").unwrap_or_default(),
        source_templates: c.list(&top, "source_templates"),
        auto: c.list(&top, "auto"),
        auto_image: top.contains_key("auto_image").then(|| c.list(&top, "auto_image")),
        routes: c.list(&top, "routes"),
        deleted_routes: c.field(&top, "deleted_routes").unwrap_or_default(),
        keys: c.list(&top, "keys"),
        deleted_keys: c.field(&top, "deleted_keys").unwrap_or_default(),
        key_scopes: c.field(&top, "key_scopes").unwrap_or_default(),
        channel_selection: c.field(&top, "channel_selection"),
    };
    (runtime, c.errors)
}

/// The effective configuration: `base` with `runtime` merged in by name, every runtime entry
/// checked as config.yaml's are (paths are the runtime file's).
pub fn with_runtime(base: &Config, runtime: &RuntimeFile, adapters: &[&str]) -> Result<Config, Vec<FieldError>> {
    let env = |_: &str| None;
    let mut c = Collector { index: LineIndex::default(), errors: Vec::new(), env: &env, positions: Default::default() };
    let mut config = merge(base, runtime);
    let mut known: Vec<String> = adapters.iter().map(|s| s.to_string()).collect();
    known.extend(adapter_names(&base.settings.adapter_dir));
    c.check_sources(&runtime.sources, &known);
    c.check_routes(&runtime.routes, &config.routes, &config.sources);
    for (i, name) in runtime.deleted_sources.iter().enumerate() {
        if !base.sources.iter().any(|s| &s.name == name) {
            c.error(&format!("deleted_sources[{i}]"), format!("no base source named `{name}`"), "remove the entry");
        }
    }
    // A route of the merged config may name a source that was deleted.
    for (i, r) in config.routes.iter().enumerate() {
        if let Some(p) = r.providers.iter().find(|p| !config.sources.iter().any(|s| s.name == p.source)) {
            c.error(
                &format!("routes[{i}]"),
                format!("route `{}` uses source `{}`, which no longer exists", r.alias, p.source),
                "remove that provider from the route first, or keep the source",
            );
        }
    }
    let mut names: HashSet<KeyName> = config.keys.iter().map(|k| k.name.clone()).collect();
    for (i, k) in runtime.keys.iter().enumerate() {
        c.unique_key_name(&format!("keys[{i}]"), &k.name, &mut names);
        if k.token_quota.is_some() {
            c.period(&format!("keys[{i}]"), k.period, k.hours);
        }
        if k.key_sha256.len() != 64 || !k.key_sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            c.error(
                &format!("keys[{i}].key_sha256"),
                "is not a sha256 digest in hex",
                "create keys through the admin API",
            );
        }
    }
    for (i, t) in runtime.source_templates.iter().enumerate() {
        if let Err(e) = t.instantiate(&SourceName::new("template-check"), &Secret::default()) {
            c.error(
                &format!("source_templates[{i}]"),
                format!("template `{}` does not make a valid source: {e}", t.name),
                "correct that field",
            );
        }
    }
    config.auto = AutoChains {
        chat: c.chain(&runtime.auto, "auto", &config, ModelKind::Chat),
        image: runtime.auto_image.as_ref().map(|slots| c.chain(slots, "auto_image", &config, ModelKind::Image)),
    };
    config.runtime_keys = runtime.keys.clone();
    config.source_templates = runtime.source_templates.clone();
    if c.errors.is_empty() { Ok(config) } else { Err(c.errors) }
}

pub fn load_str(
    text: &str,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    adapters: &[&str],
) -> Result<Config, ConfigError> {
    if let Some(error) = too_deep(text) {
        return Err(ConfigError::Invalid { file: file.to_path_buf(), errors: vec![error] });
    }
    let mut c = Collector { index: LineIndex::new(text), errors: Vec::new(), env, positions: Default::default() };
    let config = c.parse(text, adapters);
    c.errors.sort_by_key(|e| e.line.unwrap_or(0));
    match config {
        Some(config) if c.errors.is_empty() => Ok(config),
        _ => Err(ConfigError::Invalid { file: file.to_path_buf(), errors: c.errors }),
    }
}

struct Collector<'a> {
    index: LineIndex,
    errors: Vec<FieldError>,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// For each list read, the position in the file of each entry that parsed (an entry that
    /// did not is left out of the typed list, and later checks must still name the right one).
    positions: std::collections::HashMap<String, Vec<usize>>,
}

impl Collector<'_> {
    /// A quota's period; `nhour` without `hours` is an error at `path`.hours.
    fn period(&mut self, path: &str, name: PeriodName, hours: Option<u32>) -> Option<Period> {
        let period = Period::from_config(name, hours);
        if period.is_none() {
            self.error(&format!("{path}.hours"), "period nhour needs hours", "add hours: N (e.g. hours: 5)");
        }
        period
    }

    /// A key's name, checked against those `seen` before it.
    fn unique_key_name(&mut self, path: &str, name: &KeyName, seen: &mut HashSet<KeyName>) {
        if !seen.insert(name.clone()) {
            self.error(
                &format!("{path}.name"),
                format!("key name `{name}` is used twice"),
                "give every key its own name",
            );
        }
    }

    fn error(&mut self, path: &str, message: impl Into<String>, fix: impl Into<String>) {
        self.errors.push(FieldError {
            path: path.to_string(),
            line: self.index.line(path),
            message: message.into(),
            fix: fix.into(),
        });
    }

    /// The file: its settings, then the catalog (keys, sources, routes) and the checks that
    /// read across them; every error is collected, none hides another.
    fn parse(&mut self, text: &str, adapters: &[&str]) -> Option<Config> {
        let top = self.document(text)?;
        let settings = self.settings(&top);
        let channel_selection: ChannelSelection = self.field(&top, "channel_selection").unwrap_or_default();
        let keys: Vec<KeyConfig> = self.list(&top, "keys");
        let sources: Vec<SourceConfig> = self.list(&top, "sources");
        let routes: Vec<RouteConfig> = self.list(&top, "routes");
        self.check_keys(&keys);
        self.check_public_keys(&keys, settings.listen);
        let mut known: Vec<String> = adapters.iter().map(|s| s.to_string()).collect();
        known.extend(adapter_names(&settings.adapter_dir));
        self.check_sources(&sources, &known);
        self.check_routes(&routes, &routes, &sources);
        for (model, order) in &settings.priority_orders {
            for (i, name) in order.iter().enumerate() {
                if !sources.iter().any(|s| &s.name == name) {
                    self.error(
                        &format!("priority_orders.{model}[{i}]"),
                        format!("no source named `{name}`"),
                        "list source names from `sources:`",
                    );
                }
            }
        }
        Some(Config {
            settings: Arc::new(settings),
            channel_selection,
            keys,
            sources,
            routes,
            auto: AutoChains::default(),
            runtime_keys: Vec::new(),
            source_templates: Vec::new(),
        })
    }

    /// The file as a YAML mapping with `${VAR}` expanded and unknown top-level settings named.
    fn document(&mut self, text: &str) -> Option<Mapping> {
        let mut doc: Value = match serde_yaml::from_str(text) {
            Ok(Value::Null) => Value::Mapping(Mapping::new()),
            Ok(doc) => doc,
            Err(e) => {
                let line = e.location().map(|l| l.line());
                self.errors.push(FieldError {
                    path: String::new(),
                    line,
                    message: format!("not valid YAML: {e}"),
                    fix: "correct the YAML syntax on that line".into(),
                });
                return None;
            }
        };
        self.expand_tree(&mut doc, String::new());
        let Value::Mapping(top) = doc else {
            self.error(
                "",
                "the file must be a mapping of settings (listen:, sources:, ...)",
                "start from config.example.yaml",
            );
            return None;
        };
        for key in top.keys() {
            let key = key.as_str().unwrap_or_default();
            if !TOP_LEVEL.contains(&key) {
                let hint = closest(key, TOP_LEVEL).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
                self.error(
                    key,
                    format!("unknown setting `{key}`"),
                    format!("remove it or correct its spelling{hint}; known settings: {}", TOP_LEVEL.join(", ")),
                );
            }
        }
        Some(top)
    }

    /// What only a restart changes, each field read and checked on its own.
    fn settings(&mut self, top: &Mapping) -> Settings {
        let listen_text: String = self.field(top, "listen").unwrap_or_else(|| "127.0.0.1:8080".into());
        let listen = match listen_text.parse::<SocketAddr>() {
            Ok(addr) => addr,
            Err(_) => {
                self.error(
                    "listen",
                    format!("`{listen_text}` is not an address with a port"),
                    "write host:port, e.g. 127.0.0.1:8080 or 0.0.0.0:8080",
                );
                // Recorded: the file is refused; the other checks still run on the default.
                SocketAddr::from(([127, 0, 0, 1], 8080))
            }
        };
        let admin_token = match self.field::<Secret>(top, "admin_token") {
            None => AdminToken::Auto,
            Some(t) if t.is_empty() => AdminToken::Off,
            Some(t) if t.expose() == "auto" => AdminToken::Auto,
            Some(t) => AdminToken::Given(t),
        };
        let data_dir: PathBuf = self.field(top, "data_dir").unwrap_or_else(|| PathBuf::from("./data"));
        let adapter_dir: PathBuf = self.field(top, "adapter_dir").unwrap_or_else(|| data_dir.join("adapters"));
        let cache_dir: Option<PathBuf> = self.field(top, "cache_dir");
        let body_limit_mb: u64 = self.field(top, "body_limit_mb").unwrap_or(super::DEFAULT_BODY_LIMIT_MB);
        if !(1..=MAX_BODY_LIMIT_MB).contains(&body_limit_mb) {
            self.error(
                "body_limit_mb",
                format!("must be between 1 and {MAX_BODY_LIMIT_MB}"),
                "write a size in MiB, e.g. 32",
            );
        }
        let body_limit_mb = body_limit_mb.clamp(1, MAX_BODY_LIMIT_MB);
        let sandbox: SandboxConfig = self.field(top, "sandbox").unwrap_or_default();
        let server: super::ServerLimits = self.field(top, "server").unwrap_or_default();
        self.check_server(&server);
        let cooldown: CooldownPolicy = self.field(top, "cooldown").unwrap_or_default();
        self.check_cooldown(&cooldown);
        let default_model: Option<String> = self.field::<String>(top, "default_model").filter(|m| !m.is_empty());
        let runtime_file: PathBuf = self.field(top, "runtime_file").unwrap_or_else(|| data_dir.join("runtime.yaml"));
        let priority_orders: std::collections::BTreeMap<String, Vec<SourceName>> =
            self.field(top, "priority_orders").unwrap_or_default();
        let scoring: ScoringPolicy = self.field(top, "scoring").unwrap_or_default();
        let affinity: AffinityPolicy = self.field(top, "affinity").unwrap_or_default();
        let log_retention_days: Option<u32> = self.field(top, "log_retention_days").or(Some(30));
        let response_retention_days: Option<u32> = self.field(top, "response_retention_days").or(Some(30));
        let stored_responses: super::StoredResponsesConfig = self.field(top, "stored_responses").unwrap_or_default();
        if !(1..=1 << 20).contains(&stored_responses.max_mb_per_key_per_day) {
            self.error(
                "stored_responses.max_mb_per_key_per_day",
                "must be between 1 and 1048576",
                "e.g. 100 (the default); store: false in requests stores nothing",
            );
        }
        if stored_responses.max_turn_kb == 0 || stored_responses.max_turn_kb > (body_limit_mb << 10) {
            self.error(
                "stored_responses.max_turn_kb",
                format!("must be between 1 and body_limit_mb in KiB ({})", body_limit_mb << 10),
                "e.g. 1024 (the default)",
            );
        }
        let log_format: super::LogFormat = self.field(top, "log_format").unwrap_or_default();
        let telemetry: Option<super::TelemetryConfig> = self.field(top, "telemetry");
        let metrics: super::MetricsConfig = self.field(top, "metrics").unwrap_or_default();
        self.check_metrics(&metrics);
        self.check_admin_token(&admin_token, listen);
        if let Some(t) = &telemetry {
            if !(t.otlp_endpoint.starts_with("http://") || t.otlp_endpoint.starts_with("https://")) {
                self.error(
                    "telemetry.otlp_endpoint",
                    format!("`{}` is not an http(s) URL", t.otlp_endpoint),
                    "write the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318",
                );
            }
            if !(0.0..=1.0).contains(&t.sample_ratio) {
                self.error("telemetry.sample_ratio", "must be between 0 and 1", "e.g. 1 (every trace) or 0.1");
            }
        }
        // A URL alone, or a block whose fields are checked one by one.
        let shared_state = match top.get("shared_state") {
            Some(Value::String(_)) => self.field(top, "shared_state").map(super::SharedStateWritten::Url),
            _ => self.field(top, "shared_state").map(super::SharedStateWritten::Block),
        }
        .and_then(|w| self.shared_state(w));
        let telegram: Option<super::TelegramConfig> = self.field(top, "telegram");
        if let Some(t) = &telegram {
            self.check_telegram(t, &admin_token);
        }
        let adapter_policies: std::collections::BTreeMap<super::AdapterName, super::AdapterPolicy> =
            self.field(top, "adapters").unwrap_or_default();
        self.check_sandbox(&sandbox, (body_limit_mb as usize) << 20);
        self.check_adapter_policies(&adapter_policies, &sandbox);
        self.check_scoring(&scoring);
        Settings {
            listen,
            admin_token,
            data_dir,
            adapter_dir,
            cache_dir,
            body_limit_bytes: (body_limit_mb as usize) << 20,
            sandbox,
            server,
            cooldown,
            default_model,
            runtime_file,
            priority_orders,
            scoring,
            affinity,
            log_retention_days,
            response_retention_days,
            stored_responses,
            log_format,
            telemetry,
            metrics,
            telegram,
            shared_state,
            adapters: adapter_policies,
        }
    }

    /// Expands `${VAR}` in every string scalar (not in keys), recording unset variables.
    fn expand_tree(&mut self, value: &mut Value, path: String) {
        match value {
            Value::String(s) => match expand(s, self.env) {
                Ok(expanded) => *s = expanded,
                Err(e) => self.error(
                    &path,
                    e.to_string(),
                    "export the variable before starting, or give a default: ${NAME:-value}",
                ),
            },
            Value::Sequence(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    self.expand_tree(item, format!("{path}[{i}]"));
                }
            }
            Value::Mapping(map) => {
                for (k, v) in map.iter_mut() {
                    let k = k.as_str().unwrap_or_default();
                    let child = if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
                    self.expand_tree(v, child);
                }
            }
            _ => {}
        }
    }

    fn field<T: DeserializeOwned>(&mut self, map: &Mapping, key: &str) -> Option<T> {
        let value = map.get(key)?.clone();
        self.typed(value, key)
    }

    /// A list whose entries parse one by one, so a bad entry does not hide the others.
    fn list<T: DeserializeOwned>(&mut self, map: &Mapping, key: &str) -> Vec<T> {
        match map.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Sequence(items)) => {
                let items = items.clone();
                let mut positions = Vec::new();
                let typed = items
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, item)| {
                        let value = self.typed(item, &format!("{key}[{i}]"))?;
                        positions.push(i);
                        Some(value)
                    })
                    .collect();
                self.positions.insert(key.to_string(), positions);
                typed
            }
            Some(_) => {
                self.error(
                    key,
                    format!("`{key}` must be a list"),
                    format!("write each entry on its own line starting with `- ` under `{key}:`"),
                );
                Vec::new()
            }
        }
    }

    fn typed<T: DeserializeOwned>(&mut self, value: Value, path: &str) -> Option<T> {
        match serde_path_to_error::deserialize::<_, T>(value) {
            Ok(v) => Some(v),
            Err(e) => {
                let inner = e.path().to_string();
                let full = match (inner.as_str(), path) {
                    ("." | "", _) => path.to_string(),
                    (_, "") => inner,
                    _ => format!("{path}.{inner}"),
                };
                let message = e.into_inner().to_string();
                // A route's mode without its settings names the missing field first.
                let (full, message) = match message.split_once(": ") {
                    Some((field @ ("adapter_config" | "fusion_config"), rest)) => {
                        (format!("{full}.{field}"), rest.to_string())
                    }
                    _ => (full, message),
                };
                let fix = fix_for(&message);
                self.error(&full, message, fix);
                None
            }
        }
    }

    fn check_cooldown(&mut self, c: &CooldownPolicy) {
        let spans = [
            ("transient_base_ms", c.transient_base_ms),
            ("transient_cap_ms", c.transient_cap_ms),
            ("auth_ms", c.auth_ms),
            ("rate_limit_ms", c.rate_limit_ms),
            ("quota_cap_ms", c.quota_cap_ms),
            ("probe_after_ms", c.probe_after_ms),
        ];
        for (field, ms) in spans.into_iter().chain(c.ladder_ms.iter().map(|ms| ("ladder_ms", *ms))) {
            if ms as f64 > MAX_SECONDS * 1000.0 {
                self.error(
                    &format!("cooldown.{field}"),
                    "must be at most 10000000000 ms",
                    "write milliseconds, e.g. 5000",
                );
            }
        }
    }

    fn check_server(&mut self, s: &super::ServerLimits) {
        if s.max_connections == 0 || s.max_in_flight == 0 {
            let field = if s.max_connections == 0 { "server.max_connections" } else { "server.max_in_flight" };
            self.error(field, "must be at least 1", "write a count, e.g. 10000");
        }
        if s.http2_max_streams == 0 {
            self.error("server.http2_max_streams", "must be at least 1", "write a count, e.g. 200");
        }
        for (field, secs) in [
            ("server.header_timeout_seconds", s.header_timeout_seconds),
            ("server.body_timeout_seconds", s.body_timeout_seconds),
            ("server.idle_timeout_seconds", s.idle_timeout_seconds),
        ] {
            if !(seconds(secs, false) && secs <= 86_400.0) {
                self.error(field, "must be a number of seconds above 0 (at most a day)", "write e.g. 10");
            }
        }
    }

    fn check_sandbox(&mut self, s: &SandboxConfig, body_limit_bytes: usize) {
        let needed_mb = SandboxLimits::memory_to_translate(body_limit_bytes).div_ceil(1 << 20);
        match s.memory_mb {
            Some(mb) if !(1..=4096).contains(&mb) => self.error(
                "sandbox.memory_mb",
                "must be between 1 and 4096",
                "write the per-instance memory cap in MiB, or leave it out to size it from body_limit_mb",
            ),
            Some(mb) if (mb as usize) < needed_mb => self.error(
                "sandbox.memory_mb",
                format!(
                    "{mb} MiB cannot translate a request of body_limit_mb ({} MiB): an adapter needs about {needed_mb} MiB for that",
                    body_limit_bytes >> 20
                ),
                format!("raise sandbox.memory_mb to {needed_mb}, lower body_limit_mb, or leave memory_mb out"),
            ),
            _ => {}
        }
        if s.cpu_ms_per_call == 0 {
            self.error(
                "sandbox.cpu_ms_per_call",
                "must be at least 1",
                "write the CPU bound per adapter call in ms, e.g. 500",
            );
        }
        if s.cpu_ms_per_call as f64 > MAX_SECONDS * 1000.0 || s.wall_ms_per_call as f64 > MAX_SECONDS * 1000.0 {
            self.error(
                "sandbox.wall_ms_per_call",
                "must be at most 10000000000 ms (so must cpu_ms_per_call)",
                "write the bound per adapter call in ms, e.g. 60000",
            );
        }
        if s.wall_ms_per_call < s.cpu_ms_per_call {
            self.error(
                "sandbox.wall_ms_per_call",
                "must be at least sandbox.cpu_ms_per_call",
                "write the wall-clock bound per adapter call in ms, e.g. 60000",
            );
        }
        if s.max_output_mb == 0 {
            self.error(
                "sandbox.max_output_mb",
                "must be at least 1",
                "write the largest adapter output in MiB, e.g. 32",
            );
        }
        if s.pool_slots == 0 {
            self.error(
                "sandbox.pool_slots",
                "must be at least 1",
                "write how many instances may exist at once, e.g. 1000",
            );
        }
        if !(1..=MAX_SESSIONS_PER_INSTANCE).contains(&s.sessions_per_instance) {
            self.error(
                "sandbox.sessions_per_instance",
                format!("must be 1 to {MAX_SESSIONS_PER_INSTANCE}"),
                "write how many requests in flight one adapter instance hosts, e.g. 256",
            );
        }
    }

    fn shared_state(&mut self, written: super::SharedStateWritten) -> Option<super::SharedStateConfig> {
        let block = match written {
            super::SharedStateWritten::Url(url) => super::SharedStateBlock {
                url,
                replica: None,
                sync_ms: None,
                quotas_when_down: Default::default(),
                prefix: None,
            },
            super::SharedStateWritten::Block(block) => block,
        };
        let url = block.url.expose();
        // Shown without what comes before an `@` (a user and password).
        let shown = url.split('@').next_back().unwrap_or_default().chars().take(80).collect::<String>();
        let scheme_ok = url.starts_with("redis://") || url.starts_with("rediss://");
        let url_ok = scheme_ok && redis::IntoConnectionInfo::into_connection_info(url).is_ok();
        if !scheme_ok {
            self.error(
                "shared_state.url",
                format!("`…{shown}` is not a redis:// or rediss:// URL"),
                "write redis://HOST:PORT/DB (a password as redis://:${REDIS_PASSWORD}@HOST:PORT/0)",
            );
        } else if !url_ok {
            self.error("shared_state.url", format!("`…{shown}` is not a Redis URL"), "write redis://HOST:PORT/DB");
        }
        let sync_ms = block.sync_ms.unwrap_or(250);
        if !(20..=1000).contains(&sync_ms) {
            self.error("shared_state.sync_ms", format!("{sync_ms} is out of range"), "between 20 and 1000 (ms)");
        }
        let replica = block.replica.filter(|r| !r.is_empty()).unwrap_or_else(host_name);
        if replica.len() > 64 || replica.chars().any(|c| c.is_control()) {
            self.error("shared_state.replica", "must be 1 to 64 printable characters", "e.g. gw-1");
        }
        if !url_ok {
            return None;
        }
        Some(super::SharedStateConfig {
            url: block.url,
            replica,
            sync: std::time::Duration::from_millis(sync_ms.clamp(20, 1000)),
            quotas_when_down: block.quotas_when_down,
            prefix: block.prefix.filter(|p| !p.is_empty()).unwrap_or_else(|| "switchyard".into()),
        })
    }

    fn check_telegram(&mut self, t: &super::TelegramConfig, admin_token: &super::AdminToken) {
        if t.bot_token.expose().trim().is_empty() {
            self.error("telegram.bot_token", "is empty", "paste the token BotFather gave you, as ${TG_BOT_TOKEN}");
        }
        if t.allowed_chats.is_empty() {
            self.error(
                "telegram.allowed_chats",
                "lists no chat: the bot would answer no one",
                "write the chat ids that may command the gateway (docs/telegram.md says how to find yours)",
            );
        }
        if !(t.api_base.starts_with("http://") || t.api_base.starts_with("https://")) {
            self.error(
                "telegram.api_base",
                format!("`{}` is not an http(s) URL", t.api_base),
                "leave it out for https://api.telegram.org",
            );
        }
        if !(1..=50).contains(&t.poll_timeout_seconds) {
            self.error("telegram.poll_timeout_seconds", "must be between 1 and 50", "e.g. 30");
        }
        if !(1..=3600).contains(&t.alert_check_seconds) {
            self.error("telegram.alert_check_seconds", "must be between 1 and 3600", "e.g. 5");
        }
        if *admin_token == super::AdminToken::Off {
            self.error(
                "telegram",
                "the bot acts through the admin API, which admin_token turns off",
                "set admin_token (or leave it out: a token is made and kept in data_dir)",
            );
        }
    }

    fn check_adapter_policies(
        &mut self,
        policies: &std::collections::BTreeMap<super::AdapterName, super::AdapterPolicy>,
        sandbox: &SandboxConfig,
    ) {
        for (name, policy) in policies {
            if policy.memory_mb.is_some_and(|mb| !(1..=4096).contains(&mb)) {
                self.error(
                    &format!("adapters.{name}.memory_mb"),
                    "must be between 1 and 4096",
                    "write this adapter's memory cap per instance in MiB (a Python adapter needs about 64)",
                );
            }
            if policy.cpu_ms_per_call == Some(0) {
                self.error(&format!("adapters.{name}.cpu_ms_per_call"), "must be at least 1", "e.g. 2000");
            }
            let cpu = policy.cpu_ms_per_call.unwrap_or(sandbox.cpu_ms_per_call);
            let wall = policy.wall_ms_per_call.unwrap_or(sandbox.wall_ms_per_call);
            if cpu as f64 > MAX_SECONDS * 1000.0 || wall as f64 > MAX_SECONDS * 1000.0 {
                self.error(
                    &format!("adapters.{name}.wall_ms_per_call"),
                    "must be at most 10000000000 ms (so must cpu_ms_per_call)",
                    "write the bound per adapter call in ms, e.g. 60000",
                );
            } else if wall < cpu {
                self.error(
                    &format!("adapters.{name}.wall_ms_per_call"),
                    format!("{wall} ms is less than this adapter's cpu_ms_per_call ({cpu} ms)"),
                    "raise wall_ms_per_call (here or under sandbox:) to at least the CPU bound",
                );
            }
            if policy.max_instances == Some(0) {
                self.error(
                    &format!("adapters.{name}.max_instances"),
                    "must be at least 1",
                    "write how many warm instances this adapter may keep, e.g. 8",
                );
            }
            if policy.sessions_per_instance.is_some_and(|n| !(1..=MAX_SESSIONS_PER_INSTANCE).contains(&n)) {
                self.error(
                    &format!("adapters.{name}.sessions_per_instance"),
                    format!("must be 1 to {MAX_SESSIONS_PER_INSTANCE}"),
                    "write how many requests in flight one instance of this adapter hosts, e.g. 16",
                );
            }
        }
    }

    /// Checks `routes`; their vision and judge aliases may name any of `all_routes`.
    fn check_routes(&mut self, routes: &[RouteConfig], all_routes: &[RouteConfig], sources: &[SourceConfig]) {
        let mut seen = HashSet::new();
        let serves =
            |source: &SourceName, model: &str| sources.iter().any(|s| &s.name == source && s.model(model).is_some());
        let known = |group: &super::GroupName, alias: &str| {
            all_routes.iter().chain(routes).any(|r| &r.group == group && r.alias == alias)
                || sources.iter().any(|s| s.model(alias).is_some())
        };
        for (i, r) in routes.iter().enumerate() {
            let i = self.positions.get("routes").and_then(|p| p.get(i)).copied().unwrap_or(i);
            let at = |f: &str| format!("routes[{i}].{f}");
            if r.alias.is_empty() || r.alias == AUTO {
                self.error(&at("alias"), format!("`{}` cannot be a route alias", r.alias), "choose another name");
            } else if !seen.insert((r.group.clone(), r.alias.clone())) {
                self.error(
                    &at("alias"),
                    format!("alias `{}` is used twice in group `{}`", r.alias, r.group),
                    "give every route of a group its own alias",
                );
            }
            if r.providers.iter().all(|p| !p.enabled) {
                self.error(&at("providers"), "has no enabled provider", "add one: - {source: NAME, model: MODEL}");
            }
            for (j, p) in r.providers.iter().enumerate() {
                if !serves(&p.source, &p.model) {
                    self.error(
                        &at(&format!("providers[{j}]")),
                        format!("source `{}` does not serve model `{}`", p.source, p.model),
                        "name a source from `sources:` and one of its models",
                    );
                }
            }
            match &r.mode {
                RouteMode::Vision(v) if !known(&r.group, &v.vision_alias) => self.error(
                    &at("adapter_config.vision_alias"),
                    format!("no route or model named `{}`", v.vision_alias),
                    "name a route of the same group, or a model",
                ),
                RouteMode::Fusion(f) => {
                    if !known(&r.group, &f.judge_alias) {
                        self.error(
                            &at("fusion_config.judge_alias"),
                            format!("no route or model named `{}`", f.judge_alias),
                            "name a route of the same group, or a model",
                        );
                    }
                    if f.min_candidates == 0 {
                        self.error(&at("fusion_config.min_candidates"), "must be at least 1", "e.g. 2");
                    }
                    if !seconds(f.timeout_seconds, false) {
                        self.error(
                            &at("fusion_config.timeout_seconds"),
                            "must be a positive number of seconds (at most 10000000)",
                            "e.g. 30",
                        );
                    }
                }
                _ => {}
            }
        }
    }

    fn check_scoring(&mut self, s: &ScoringPolicy) {
        if !(s.ema_alpha > 0.0 && s.ema_alpha <= 1.0) {
            self.error("scoring.ema_alpha", "must be in (0, 1]", "write the EMA weight of a new sample, e.g. 0.25");
        }
        if s.recent_window == 0 {
            self.error(
                "scoring.recent_window",
                "must be at least 1",
                "write the attempts a success rate covers, e.g. 50",
            );
        }
        if !(0.0..=1.0).contains(&s.exploration_rate) {
            self.error("scoring.exploration_rate", "must be between 0 and 1", "write a chance, e.g. 0.2");
        }
        if s.stale_full_decay_minutes < s.stale_minutes {
            self.error(
                "scoring.stale_full_decay_minutes",
                "is before stale_minutes",
                "make it at least stale_minutes, e.g. 15 and 30",
            );
        }
    }

    /// Validates one AUTO chain: each slot's source serves its model. Slots of the other kind
    /// are dropped (a chat chain ignores image slots and vice versa).
    fn chain(&mut self, slots: &[SlotConfig], field: &str, config: &Config, kind: ModelKind) -> Vec<ChainSlot> {
        let mut out = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            let at = |f: &str| format!("{field}[{i}].{f}");
            let serving: Vec<&SourceConfig> = config
                .sources
                .iter()
                .filter(|s| slot.source.as_ref().is_none_or(|n| &s.name == n) && s.model(&slot.model).is_some())
                .collect();
            if let Some(name) = &slot.source
                && !config.sources.iter().any(|s| &s.name == name)
            {
                self.error(&at("source"), format!("no source named `{name}`"), "use a source name from config.yaml");
                continue;
            }
            if serving.is_empty() {
                let message = match &slot.source {
                    Some(source) => format!("source `{source}` does not serve model `{}`", slot.model),
                    None => format!("no source serves model `{}`", slot.model),
                };
                self.error(&at("model"), message, "use a model listed under a source's `models:`");
                continue;
            }
            let Some(period) = self.period(&format!("{field}[{i}]"), slot.period, slot.hours) else { continue };
            if serving.iter().all(|s| s.model(&slot.model).is_some_and(|m| m.kind != kind)) {
                tracing::warn!("{field}[{i}]: model `{}` is not a {kind:?} model; the slot is ignored", slot.model);
                continue;
            }
            let quota = slot.token_quota.filter(|t| *t > 0).map(|tokens| Quota { tokens, period });
            out.push(ChainSlot { model: slot.model.clone(), source: slot.source.clone(), tier: slot.tier, quota });
        }
        out
    }

    fn check_metrics(&mut self, m: &super::MetricsConfig) {
        if !(1..=10_000).contains(&m.max_label_sets) {
            self.error("metrics.max_label_sets", "must be between 1 and 10000", "e.g. 500 (the default)");
        }
        if m.token.as_ref().is_some_and(|t| t.expose().len() < MIN_TOKEN_BYTES) {
            self.error(
                "metrics.token",
                format!("is shorter than {MIN_TOKEN_BYTES} characters"),
                "use a long random token, e.g. $(openssl rand -hex 24)",
            );
        }
    }

    /// A short admin token is guessed; off loopback the admin API must not hang on one.
    fn check_admin_token(&mut self, token: &super::AdminToken, listen: SocketAddr) {
        if let super::AdminToken::Given(t) = token
            && t.expose().len() < MIN_TOKEN_BYTES
            && !listen.ip().is_loopback()
        {
            self.error(
                "admin_token",
                format!("is shorter than {MIN_TOKEN_BYTES} characters, and listen ({listen}) is not loopback"),
                "use a long random token (e.g. ADMIN_TOKEN=$(openssl rand -hex 24)), or leave admin_token out: a strong one is made and kept in data_dir",
            );
        }
    }

    /// The shipped example's development key is public: it serves on loopback only.
    fn check_public_keys(&mut self, keys: &[KeyConfig], listen: SocketAddr) {
        if listen.ip().is_loopback() {
            return;
        }
        for (i, k) in keys.iter().enumerate() {
            if k.key.expose() == EXAMPLE_KEY {
                self.error(
                    &format!("keys[{i}].key"),
                    format!("is the example config's public development key, and listen ({listen}) is not loopback"),
                    "set a key of your own (e.g. SWITCHYARD_KEY=$(openssl rand -hex 24)), or listen on 127.0.0.1",
                );
            }
        }
    }

    fn check_keys(&mut self, keys: &[KeyConfig]) {
        let mut names = HashSet::new();
        let mut values = HashSet::new();
        for (i, k) in keys.iter().enumerate() {
            if k.token_quota.is_some() {
                self.period(&format!("keys[{i}]"), k.period, k.hours);
            }
            if k.name.as_str().is_empty() {
                self.error(&format!("keys[{i}].name"), "is empty", "give the key a name, e.g. alice");
            } else {
                self.unique_key_name(&format!("keys[{i}]"), &k.name, &mut names);
            }
            if k.key.is_empty() {
                self.error(&format!("keys[{i}].key"), "is empty", "set the key, e.g. key: ${ALICE_KEY}");
            } else if !values.insert(k.key.expose().to_string()) {
                self.error(
                    &format!("keys[{i}].key"),
                    "the same key value is configured twice",
                    "give every key its own secret",
                );
            }
            if k.models.is_empty() {
                self.error(
                    &format!("keys[{i}].models"),
                    "is empty, so the key could use no model",
                    "list the models it may use, or [\"*\"] for all",
                );
            }
        }
    }

    fn check_sources(&mut self, sources: &[SourceConfig], adapters: &[String]) {
        let mut names = HashSet::new();
        for (i, s) in sources.iter().enumerate() {
            let at = |field: &str| format!("sources[{i}].{field}");
            let name = s.name.as_str();
            if name.is_empty() || name.contains(['/', ':', ' ']) {
                self.error(
                    &at("name"),
                    format!("`{name}` is not a usable source name"),
                    "use letters, digits, - and _ (clients write source/model)",
                );
            } else if !names.insert(name.to_string()) {
                self.error(
                    &at("name"),
                    format!("source name `{name}` is used twice"),
                    "give every source its own name",
                );
            }
            match reqwest::Url::parse(&s.base_url) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => {}
                _ => self.error(
                    &at("base_url"),
                    format!("`{}` is not an http(s) URL", s.base_url),
                    "write the API base, e.g. https://api.openai.com/v1",
                ),
            }
            if !adapters.iter().any(|a| a == s.adapter.as_str()) {
                let known: Vec<&str> = adapters.iter().map(String::as_str).collect();
                let near =
                    closest(s.adapter.as_str(), &known).map(|n| format!("did you mean `{n}`? ")).unwrap_or_default();
                self.error(
                    &at("adapter"),
                    format!("no adapter named `{}`", s.adapter),
                    format!("{near}use one of: {}; or put {}.wasm in adapter_dir", adapters.join(", "), s.adapter),
                );
            }
            if s.max_concurrent == 0 {
                self.error(
                    &at("max_concurrent"),
                    "must be at least 1",
                    "write how many requests may run at once, e.g. 10",
                );
            }
            if s.timeout_seconds == 0 || s.timeout_seconds as f64 > MAX_SECONDS {
                self.error(
                    &at("timeout_seconds"),
                    "must be at least 1 and at most 10000000",
                    "write the request timeout in seconds, e.g. 120",
                );
            }
            if s.connect_timeout_seconds == 0 || s.connect_timeout_seconds as f64 > MAX_SECONDS {
                self.error(
                    &at("connect_timeout_seconds"),
                    "must be at least 1 and at most 10000000",
                    "write the connect timeout in seconds, e.g. 10",
                );
            }
            if !seconds(s.queue_timeout_seconds, true) {
                self.error(
                    &at("queue_timeout_seconds"),
                    "must be zero or a positive number of seconds (at most 10000000)",
                    "write the longest wait for a free place under max_concurrent in seconds, e.g. 10",
                );
            }
            if !seconds(s.idle_timeout_seconds, false) {
                self.error(
                    &at("idle_timeout_seconds"),
                    "must be a positive number of seconds (at most 10000000)",
                    "write the longest silence between stream events in seconds, e.g. 60",
                );
            }
            if let Some(t) = s.first_byte_timeout_seconds
                && !seconds(t, false)
            {
                self.error(
                    &at("first_byte_timeout_seconds"),
                    "must be a positive number of seconds (at most 10000000)",
                    "write the longest wait for the first byte in seconds, e.g. 60",
                );
            }
            if !seconds(s.stream_timeout_seconds, false) {
                self.error(
                    &at("stream_timeout_seconds"),
                    "must be a positive number of seconds (at most 10000000)",
                    "write the longest a stream may run in seconds, e.g. 1800",
                );
            }
            if s.rpm == Some(0) {
                self.error(&at("rpm"), "must be at least 1", "write requests per minute, or remove it for no limit");
            }
            if s.models.is_empty() && !s.detect_models {
                self.error(
                    &at("models"),
                    "is empty",
                    "list the models this source serves, e.g. - name: gpt-4o, or set detect_models: true",
                );
            }
            let mut models = HashSet::new();
            for (j, m) in s.models.iter().enumerate() {
                if m.name.is_empty() {
                    self.error(&at(&format!("models[{j}].name")), "is empty", "write the model name clients ask for");
                } else if !models.insert(m.name.as_str()) {
                    self.error(
                        &at(&format!("models[{j}].name")),
                        format!("model `{}` is listed twice in this source", m.name),
                        "list each model once",
                    );
                }
            }
        }
    }
}

/// Adapter names `dir` adds to those the caller knows (built-ins and bundled scripts).
fn adapter_names(dir: &Path) -> Vec<String> {
    adapter_stems(dir)
}

/// The file stems of `*.wasm` and `*.lua` in `dir` (a missing dir has none).
fn adapter_stems(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm" || x == "lua"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .collect()
}

fn fix_for(message: &str) -> String {
    if message.starts_with("unknown field") {
        "remove it or correct its spelling (the message lists the accepted fields)".into()
    } else if let Some(field) = message.strip_prefix("missing field ") {
        format!("add {field} to this entry")
    } else if message.starts_with("unknown variant") {
        "use one of the values the message lists".into()
    } else if message == "mode adapter needs adapter_config" {
        "add adapter_config: {vision_alias: ROUTE, fallback: skip-image}".into()
    } else if message == "mode fusion needs fusion_config" {
        "add fusion_config: {judge_alias: ROUTE}".into()
    } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
        "write a value of the type the message expects".into()
    } else {
        "correct the value".into()
    }
}

/// The known name nearest to a misspelt one, if it is near enough to be a typo.
fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known.iter().map(|k| (strsim::levenshtein(name, k), *k)).filter(|(d, _)| *d <= 3).min().map(|(_, k)| k)
}

/// The machine's name, for a replica not named in the config.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty() && h.len() <= 64)
        .unwrap_or_else(|| "replica".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_past_the_limit_is_refused_before_parsing() {
        let deep = |open: &str, close: &str, n: usize| format!("sources:\n  {}0{}\n", open.repeat(n), close.repeat(n));
        assert!(too_deep(&deep("[", "]", 100)).is_none());
        assert_eq!(too_deep(&deep("[", "]", 200)).and_then(|e| e.line), Some(2));
        assert!(too_deep(&deep("{a: ", "}", 5000)).is_some());
        assert!(too_deep(&deep("- ", "", 5000)).is_some());
        assert!(too_deep(&deep("? ", "", 5000)).is_some());
        assert!(too_deep(&format!("a:\n{}b: 1\n", " ".repeat(400))).is_some());
        assert!(too_deep("name: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n").is_none(), "quoted");
    }
}
