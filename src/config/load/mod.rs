//! Reading config.yaml: YAML → `${VAR}` expansion → per-field typed parsing → semantic checks.
//! Every step collects errors instead of stopping at the first, so one run shows them all.

mod keys;
mod policies;
mod prices;
mod routes;
mod settings;
mod sources;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_yaml::{Mapping, Value};

use super::env::expand;
use super::error::{ConfigError, FieldError};
use super::locate::LineIndex;
use super::runtime::{AutoChains, RuntimeFile, merge};
use super::values::MAX_SECONDS;
use super::{
    ChannelSelection, Config, KeyConfig, KeyName, ModelKind, RouteConfig, Secret, Settings, SourceConfig, SourceName,
};
use crate::domain::{Period, PeriodName};

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
    "access_log",
    "telemetry",
    "telegram",
    "shared_state",
    "metrics",
    "stored_responses",
    "adapters",
    "pricing",
    "cache",
    "policies",
    "access",
    "prices",
    "budgets",
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
        "key_budgets",
        "channel_selection",
        "prices",
        "policies",
        "admin_tokens",
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
        key_budgets: c.field(&top, "key_budgets").unwrap_or_default(),
        channel_selection: c.field(&top, "channel_selection"),
        prices: c.list(&top, "prices"),
        policies: c.list(&top, "policies"),
        admin_tokens: c.list(&top, "admin_tokens"),
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
    c.check_prices(&runtime.prices, "prices", &config.sources);
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
    for (i, t) in runtime.admin_tokens.iter().enumerate() {
        if t.sha256.len() != 64 || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            c.error(
                &format!("admin_tokens[{i}].sha256"),
                "is not a sha256 digest in hex",
                "make personal tokens through the admin API",
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
    let sandbox_memory_mb = (base.settings.sandbox.limits(base.settings.body_limit_bytes).memory_bytes >> 20) as u64;
    c.check_policies_at(&runtime.policies, "policies", sandbox_memory_mb);
    // Every key, route and source may now name a runtime policy, and none may name one gone.
    let runtime_keys: Vec<KeyConfig> = runtime.keys.iter().map(|k| k.as_key_config()).collect();
    let mut attached = policies::attached(&config.keys, &config.routes, &config.sources, "");
    attached.extend(policies::attached(&runtime_keys, &[], &[], ""));
    c.check_policy_refs(&config.policies, &attached);
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
        let prices: Vec<crate::config::PriceOverride> = self.list(&top, "prices");
        let budgets: Vec<crate::config::GroupBudget> = self.list(&top, "budgets");
        self.check_prices(&prices, "prices", &sources);
        self.check_budgets(&budgets);
        self.check_keys(&keys);
        self.check_public_keys(&keys, settings.listen);
        let mut known: Vec<String> = adapters.iter().map(|s| s.to_string()).collect();
        known.extend(adapter_names(&settings.adapter_dir));
        self.check_sources(&sources, &known);
        self.check_routes(&routes, &routes, &sources);
        self.check_policy_refs(&settings.policies, &policies::attached(&keys, &routes, &sources, ""));
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
        let settings_policies = settings.policies.clone();
        Some(Config {
            settings: Arc::new(settings),
            channel_selection,
            keys,
            sources,
            routes,
            auto: AutoChains::default(),
            runtime_keys: Vec::new(),
            source_templates: Vec::new(),
            prices,
            budgets,
            policies: settings_policies,
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

    /// Parses `value` as `T`, reporting each bad field of it: serde stops at the first, so
    /// that field is reported and taken out (its default applies, or a required one gets a
    /// stand-in) and the rest parsed again, so that one run names every bad field and the
    /// checks after still see the entry. Whatever was reported fails the load: a stand-in
    /// never serves.
    fn typed<T: DeserializeOwned>(&mut self, mut value: Value, path: &str) -> Option<T> {
        let mut taken_out: Vec<String> = Vec::new();
        let mut stood_in: Vec<String> = Vec::new();
        for _ in 0..MAX_FIELD_ERRORS_PER_ENTRY {
            let e = match serde_path_to_error::deserialize::<_, T>(&value) {
                Ok(v) => return Some(v),
                Err(e) => e,
            };
            let inner = e.path().to_string();
            let message = e.into_inner().to_string();
            // A required field taken out above: a stand-in, once, else the entry is lost.
            if let Some(field) = missing_field(&message) {
                let at = join(&inner, field);
                if taken_out.contains(&at) {
                    let placed = !stood_in.contains(&at) && stand_in(field).is_some_and(|v| put(&mut value, &at, v));
                    if !placed {
                        return None;
                    }
                    stood_in.push(at);
                    continue;
                }
            }
            let full = match (inner.as_str(), path) {
                ("." | "", _) => path.to_string(),
                (_, "") => inner.clone(),
                _ => format!("{path}.{inner}"),
            };
            // A route's mode without its settings names the missing field first.
            let (full, message) = match message.split_once(": ") {
                Some((field @ ("adapter_config" | "fusion_config"), rest)) => {
                    (format!("{full}.{field}"), rest.to_string())
                }
                _ => (full, message),
            };
            let fix = fix_for(&message, &full);
            self.error(&full, message, fix);
            if inner == "." || inner.is_empty() || !take_out(&mut value, &inner) {
                return None;
            }
            taken_out.push(inner);
        }
        None
    }
}

/// How many bad fields of one entry are reported before the rest of it is given up.
const MAX_FIELD_ERRORS_PER_ENTRY: usize = 32;

/// `missing field `x`` → `x`.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.strip_suffix('`')
}

/// What a required field holds while the rest of its entry is checked (never served: the
/// field's own error fails the load).
fn stand_in(field: &str) -> Option<Value> {
    match field {
        "base_url" | "otlp_endpoint" => Some(Value::String("http://stand-in.invalid/".into())),
        _ => None,
    }
}

fn join(parent: &str, field: &str) -> String {
    if parent.is_empty() || parent == "." { field.to_string() } else { format!("{parent}.{field}") }
}

/// A path as serde_path_to_error writes it (`models[0].kind`) as its steps.
fn steps(path: &str) -> Option<Vec<Result<String, usize>>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(at) => (&part[..at], &part[at..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Ok(key.to_string()));
        }
        while let Some(open) = rest.strip_prefix('[') {
            let close = open.find(']')?;
            out.push(Err(open[..close].parse().ok()?));
            rest = &open[close + 1..];
        }
    }
    Some(out)
}

/// The mapping that holds the last step of `path`, and that step's key.
fn parent_of<'v>(value: &'v mut Value, path: &str) -> Option<(&'v mut Mapping, String)> {
    let mut steps = steps(path)?;
    let Some(Ok(last)) = steps.pop() else { return None };
    let mut at = value;
    for step in steps {
        at = match step {
            Ok(key) => at.as_mapping_mut()?.get_mut(key.as_str())?,
            Err(index) => at.as_sequence_mut()?.get_mut(index)?,
        };
    }
    Some((at.as_mapping_mut()?, last))
}

/// Takes the field at `path` out of `value`; false when there is no such field.
fn take_out(value: &mut Value, path: &str) -> bool {
    parent_of(value, path).is_some_and(|(map, key)| map.remove(key.as_str()).is_some())
}

/// Puts `field` at `path` in `value`; false when its parent is not there.
fn put(value: &mut Value, path: &str, field: Value) -> bool {
    parent_of(value, path).map(|(map, key)| map.insert(Value::String(key), field)).is_some()
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

fn fix_for(message: &str, path: &str) -> String {
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
    } else if message.ends_with(super::values::BASE_URL_PROBLEM) {
        match path {
            "telegram.api_base" => "leave it out for https://api.telegram.org",
            "telemetry.otlp_endpoint" => "write the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318",
            _ => "write the API base, e.g. https://api.openai.com/v1",
        }
        .into()
    } else if message.starts_with(super::values::SECONDS_PROBLEM) || message.starts_with(super::values::WAIT_PROBLEM) {
        "write a number of seconds, e.g. 60".into()
    } else if message.starts_with(super::values::RANGE_PROBLEM) {
        match path {
            "shared_state.sync_ms" => "write how often replicas sync, in milliseconds, e.g. 250",
            "metrics.max_label_sets" => "e.g. 500 (the default)",
            "telegram.poll_timeout_seconds" => "e.g. 30",
            "telegram.alert_check_seconds" => "e.g. 5",
            _ => "write a whole number in that range",
        }
        .into()
    } else if message.starts_with(super::values::RATIO_PROBLEM) {
        "e.g. 1 (every trace) or 0.1".into()
    } else if message.starts_with(super::values::WHOLE_SECONDS_PROBLEM) {
        "write a whole number of seconds, e.g. 120".into()
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

    #[test]
    fn every_bad_field_of_one_entry_is_named_and_the_checks_after_still_run() {
        let text = "data_dir: /tmp/switchyard-never-written\nsources:\n  - name: s\n    base_url: ftp://nope\n    timeout_seconds: 0\n    idle_timeout_seconds: -1\n    max_concurent: 3\n    adapter: opeani\n    models: [{name: m, kind: video}]\n";
        let Err(ConfigError::Invalid { errors, .. }) = load_str(text, Path::new("c.yaml"), &|_| None, &["openai"])
        else {
            panic!("a config with bad fields loaded");
        };
        let found: Vec<(&str, &str)> = errors.iter().map(|e| (e.path.as_str(), e.fix.as_str())).collect();
        for (path, fix) in [
            ("sources[0].base_url", "write the API base, e.g. https://api.openai.com/v1"),
            ("sources[0].timeout_seconds", "write a whole number of seconds, e.g. 120"),
            ("sources[0].idle_timeout_seconds", "write a number of seconds, e.g. 60"),
            ("sources[0].max_concurent", "remove it or correct its spelling (the message lists the accepted fields)"),
            ("sources[0].models[0].kind", "use one of the values the message lists"),
        ] {
            assert!(found.contains(&(path, fix)), "no {path} with its fix in {found:?}");
        }
        // The adapter is checked after the entry parsed, on what the stand-ins let through.
        assert!(found.iter().any(|(path, _)| *path == "sources[0].adapter"), "{found:?}");
        assert_eq!(errors.len(), 6, "{errors:?}");
    }

    #[test]
    fn paths_are_walked_as_serde_writes_them() {
        let mut value: Value = serde_yaml::from_str("a: {b: [{c: 1, d: 2}]}").unwrap();
        assert!(take_out(&mut value, "a.b[0].c"));
        assert!(!take_out(&mut value, "a.b[0].c") && !take_out(&mut value, "a.b[3].d") && !take_out(&mut value, "."));
        assert!(put(&mut value, "a.b[0].e", Value::Bool(true)));
        assert_eq!(value, serde_yaml::from_str::<Value>("a: {b: [{d: 2, e: true}]}").unwrap());
    }

    #[test]
    fn a_url_setting_is_refused_with_the_fix_for_that_setting() {
        let text =
            "data_dir: /tmp/switchyard-never-written\ntelemetry: {otlp_endpoint: 'collector:4318'}\nsources: []\n";
        let Err(ConfigError::Invalid { errors, .. }) = load_str(text, Path::new("c.yaml"), &|_| None, &["openai"])
        else {
            panic!("a non-http collector address was accepted");
        };
        let e = errors.iter().find(|e| e.path == "telemetry.otlp_endpoint").expect("the endpoint named");
        assert!(e.message.contains("is not an http(s) URL") && e.fix.contains("OTLP/HTTP"), "{e:?}");
    }
}
