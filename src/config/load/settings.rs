//! The settings only a restart changes: each read on its own, then checked (listen, admin token,
//! server limits, sandbox, cooldown, shared state, Telegram, adapter policies, scoring, metrics).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde_yaml::{Mapping, Value};

use super::{Collector, MAX_BODY_LIMIT_MB, MAX_SECONDS, MAX_SESSIONS_PER_INSTANCE, MIN_TOKEN_BYTES, host_name};
use crate::config::{AdminToken, SandboxConfig, Secret, Settings, SourceName};
use crate::domain::{AffinityPolicy, CooldownPolicy, SandboxLimits, ScoringPolicy};

impl Collector<'_> {
    /// What only a restart changes, each field read and checked on its own.
    pub(super) fn settings(&mut self, top: &Mapping) -> Settings {
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
        let body_limit_mb: u64 = self.field(top, "body_limit_mb").unwrap_or(crate::config::DEFAULT_BODY_LIMIT_MB);
        if !(1..=MAX_BODY_LIMIT_MB).contains(&body_limit_mb) {
            self.error(
                "body_limit_mb",
                format!("must be between 1 and {MAX_BODY_LIMIT_MB}"),
                "write a size in MiB, e.g. 32",
            );
        }
        let body_limit_mb = body_limit_mb.clamp(1, MAX_BODY_LIMIT_MB);
        let sandbox: SandboxConfig = self.field(top, "sandbox").unwrap_or_default();
        let server: crate::config::ServerLimits = self.field(top, "server").unwrap_or_default();
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
        let stored_responses: crate::config::StoredResponsesConfig =
            self.field(top, "stored_responses").unwrap_or_default();
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
        let log_format: crate::config::LogFormat = self.field(top, "log_format").unwrap_or_default();
        let access_log: bool = self.field(top, "access_log").unwrap_or_default();
        let telemetry: Option<crate::config::TelemetryConfig> = self.field(top, "telemetry");
        let metrics: crate::config::MetricsConfig = self.field(top, "metrics").unwrap_or_default();
        self.check_metrics(&metrics);
        self.check_admin_token(&admin_token, listen);
        // A URL alone, or a block whose fields are checked one by one.
        let shared_state = match top.get("shared_state") {
            Some(Value::String(_)) => self.field(top, "shared_state").map(crate::config::SharedStateWritten::Url),
            _ => self.field(top, "shared_state").map(crate::config::SharedStateWritten::Block),
        }
        .and_then(|w| self.shared_state(w));
        let telegram: Option<crate::config::TelegramConfig> = self.field(top, "telegram");
        if let Some(t) = &telegram {
            self.check_telegram(t, &admin_token);
        }
        let adapter_policies: std::collections::BTreeMap<crate::config::AdapterName, crate::config::AdapterPolicy> =
            self.field(top, "adapters").unwrap_or_default();
        self.check_sandbox(&sandbox, (body_limit_mb as usize) << 20);
        self.check_adapter_policies(&adapter_policies, &sandbox);
        self.check_scoring(&scoring);
        let pricing: crate::config::PricingConfig = self.field(top, "pricing").unwrap_or_default();
        let cache: crate::config::CacheConfig = self.field(top, "cache").unwrap_or_default();
        if let Some((field, what, fix)) = cache.problem() {
            self.error(&format!("cache.{field}"), what, fix);
        }
        let access: crate::config::AccessConfig = self.field(top, "access").unwrap_or_default();
        if let Some((field, what, fix)) = access.sso.as_ref().and_then(|s| s.problem()) {
            self.error(&format!("access.sso.{field}"), what, fix);
        }
        let policies: Vec<crate::config::PolicyConfig> = self.list(top, "policies");
        let sandbox_memory_mb = (sandbox.limits((body_limit_mb as usize) << 20).memory_bytes >> 20) as u64;
        self.check_policies(&policies, sandbox_memory_mb);
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
            access_log,
            telemetry,
            metrics,
            telegram,
            shared_state,
            adapters: adapter_policies,
            pricing,
            access,
            cache,
            policies,
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

    fn check_server(&mut self, s: &crate::config::ServerLimits) {
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
            if secs.get() > 86_400.0 {
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

    fn shared_state(&mut self, written: crate::config::SharedStateWritten) -> Option<crate::config::SharedStateConfig> {
        let block = match written {
            crate::config::SharedStateWritten::Url(url) => crate::config::SharedStateBlock {
                url,
                replica: None,
                sync_ms: None,
                quotas_when_down: Default::default(),
                prefix: None,
            },
            crate::config::SharedStateWritten::Block(block) => block,
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
        let replica = block.replica.filter(|r| !r.is_empty()).unwrap_or_else(host_name);
        if replica.len() > 64 || replica.chars().any(|c| c.is_control()) {
            self.error("shared_state.replica", "must be 1 to 64 printable characters", "e.g. gw-1");
        }
        if !url_ok {
            return None;
        }
        Some(crate::config::SharedStateConfig {
            url: block.url,
            replica,
            sync: std::time::Duration::from_millis(block.sync_ms.map_or(250, |ms| ms.get())),
            quotas_when_down: block.quotas_when_down,
            prefix: block.prefix.filter(|p| !p.is_empty()).unwrap_or_else(|| "switchyard".into()),
        })
    }

    fn check_telegram(&mut self, t: &crate::config::TelegramConfig, admin_token: &crate::config::AdminToken) {
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
        if *admin_token == crate::config::AdminToken::Off {
            self.error(
                "telegram",
                "the bot acts through the admin API, which admin_token turns off",
                "set admin_token (or leave it out: a token is made and kept in data_dir)",
            );
        }
    }

    fn check_adapter_policies(
        &mut self,
        policies: &std::collections::BTreeMap<crate::config::AdapterName, crate::config::AdapterPolicy>,
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

    fn check_metrics(&mut self, m: &crate::config::MetricsConfig) {
        if m.token.as_ref().is_some_and(|t| t.expose().len() < MIN_TOKEN_BYTES) {
            self.error(
                "metrics.token",
                format!("is shorter than {MIN_TOKEN_BYTES} characters"),
                "use a long random token, e.g. $(openssl rand -hex 24)",
            );
        }
    }

    /// A short admin token is guessed; off loopback the admin API must not hang on one.
    fn check_admin_token(&mut self, token: &crate::config::AdminToken, listen: SocketAddr) {
        if let crate::config::AdminToken::Given(t) = token
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
}
