//! Policies on the request path: which apply to a request (global, its key's, its route's, its
//! source's, in that order), and how each verdict becomes a rewrite, a refusal or a log entry.

mod stream;
mod trail;

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::StatusCode;

pub use self::stream::Guard;
pub use self::trail::Trail;
use super::Gateway;
use super::auth::KeyEntry;
use super::error::{ApiError, ErrorType};
use crate::config::{OnError, PolicyConfig, PolicyName, RouteConfig, SourceConfig};
use crate::plugin::{
    BUILTIN_POLICIES, Denial, Finish, Hooks, Outcome, PluginHost, PolicyContext, PolicyFailure, PolicyPlugin,
    SandboxLimits, Verdict,
};

/// Every policy the config defines, loaded once at start.
#[derive(Default)]
pub struct Policies {
    by_name: HashMap<PolicyName, Arc<Attached>>,
    global: Vec<Arc<Attached>>,
}

/// A loaded policy with the settings and failure meaning its config gives it.
pub struct Attached {
    name: PolicyName,
    /// As defined (config.yaml's or the runtime file's), to tell what a change touches.
    config: PolicyConfig,
    plugin: Arc<PolicyPlugin>,
    settings: Vec<(String, String)>,
    on_error: OnError,
}

/// Components loaded ahead of a change that names them (an upload), by policy name.
pub type Staged = HashMap<PolicyName, Arc<PolicyPlugin>>;

/// Policies in the order they run; each at most once.
#[derive(Clone, Default)]
pub struct Chain(Vec<Arc<Attached>>);

impl Chain {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn add(&mut self, policy: &Arc<Attached>) {
        if !self.0.iter().any(|p| p.name == policy.name) {
            self.0.push(Arc::clone(policy));
        }
    }

    /// This chain, then `more`'s policies not in it.
    pub fn then(&self, more: &Chain) -> Chain {
        let mut chain = self.clone();
        more.0.iter().for_each(|p| chain.add(p));
        chain
    }

    fn with(&self, hook: Hooks) -> impl Iterator<Item = &Arc<Attached>> {
        self.0.iter().filter(move |p| p.plugin.has(hook))
    }

    /// Whether a hook of it reads a streamed answer (`stream`) or a whole one.
    pub fn reads(&self, stream: bool) -> bool {
        let hooks = if stream { Hooks::STREAM | Hooks::FINISH } else { Hooks::ANSWER | Hooks::FINISH };
        self.0.iter().any(|p| p.plugin.metadata().hooks.intersects(hooks))
    }

    /// The most streamed text any of its stream hooks asks to be held back.
    fn hold_back(&self) -> usize {
        self.with(Hooks::STREAM).map(|p| p.plugin.hold_back()).max().unwrap_or(0)
    }

    /// The names, for the cache's partition: an answer checked by one chain is not served
    /// where another applies.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|p| p.name.as_str())
    }
}

impl Policies {
    /// Loads each of `configs` (a built-in, or its `.wasm` file) within its limits; the
    /// error names the policy, its plugin and what is wrong.
    pub async fn load(
        host: &PluginHost,
        configs: &[PolicyConfig],
        sandbox: &SandboxLimits,
        data_dir: &std::path::Path,
    ) -> anyhow::Result<Policies> {
        let mut staged = Staged::new();
        for config in configs {
            let plugin =
                load_component(host, config, sandbox, data_dir).await.map_err(|e| anyhow::anyhow!("policies: {e}"))?;
            staged.insert(config.name.clone(), plugin);
        }
        Policies::default().rebuild(configs, &staged).map_err(|e| anyhow::anyhow!("policies: {e}"))
    }

    /// The policies `configs` define, each with the component `staged` has for it or, when its
    /// component and limits did not change, the one it has now (settings change without a load).
    pub fn rebuild(&self, configs: &[PolicyConfig], staged: &Staged) -> Result<Policies, String> {
        let mut policies = Policies::default();
        for config in configs {
            let kept = self.by_name.get(&config.name).filter(|a| same_component(&a.config, config));
            let plugin = staged
                .get(&config.name)
                .or(kept.map(|a| &a.plugin))
                .ok_or_else(|| format!("`{}`: its component (`{}`) is not loaded here", config.name, config.plugin))?;
            let attached = Arc::new(Attached {
                name: config.name.clone(),
                config: config.clone(),
                plugin: Arc::clone(plugin),
                settings: config.settings.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                on_error: config.on_error,
            });
            if config.global {
                policies.global.push(Arc::clone(&attached));
            }
            policies.by_name.insert(config.name.clone(), attached);
        }
        Ok(policies)
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Whether it runs `config`'s component within `config`'s limits already.
    pub fn runs(&self, config: &PolicyConfig) -> bool {
        self.by_name.get(&config.name).is_some_and(|a| same_component(&a.config, config))
    }

    /// What a request passes before routing: the global policies, the key's, the route's.
    pub fn chain(&self, key: &KeyEntry, route: Option<&RouteConfig>) -> Chain {
        let mut chain = Chain::default();
        self.global.iter().for_each(|p| chain.add(p));
        let named = key.policies.iter().chain(route.into_iter().flat_map(|r| r.policies.iter()));
        named.filter_map(|name| self.by_name.get(name)).for_each(|p| chain.add(p));
        chain
    }

    /// What a request passes on its way to `source` (and its answer on the way back).
    pub fn of_source(&self, source: &SourceConfig) -> Chain {
        let mut chain = Chain::default();
        source.policies.iter().filter_map(|name| self.by_name.get(name)).for_each(|p| chain.add(p));
        chain
    }

    /// The loaded policies, for the admin API: name, component, hooks.
    pub fn describe(&self) -> Vec<serde_json::Value> {
        let mut out: Vec<_> = self
            .by_name
            .values()
            .map(|p| {
                let m = p.plugin.metadata();
                let hooks: Vec<&str> = [
                    (Hooks::REQUEST, "request"),
                    (Hooks::ANSWER, "answer"),
                    (Hooks::STREAM, "stream"),
                    (Hooks::FINISH, "finish"),
                ]
                .into_iter()
                .filter(|(h, _)| m.hooks.contains(*h))
                .map(|(_, name)| name)
                .collect();
                serde_json::json!({
                    "name": p.name, "plugin": p.config.plugin, "component": m.name, "version": m.version,
                    "hooks": hooks, "hold_back": p.plugin.hold_back(),
                    "global": self.global.iter().any(|g| g.name == p.name), "on_error": p.on_error,
                    "settings": p.config.settings,
                })
            })
            .collect();
        out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        out
    }
}

/// Loads the component `config` names (a built-in, or its `.wasm` file) within its limits.
pub async fn load_component(
    host: &PluginHost,
    config: &PolicyConfig,
    sandbox: &SandboxLimits,
    data_dir: &std::path::Path,
) -> Result<Arc<PolicyPlugin>, String> {
    let wasm = match config.file(data_dir) {
        Some(path) => std::fs::read(&path).map_err(|e| {
            format!("`{}` names the file {} (plugin:), which cannot be read: {e}", config.name, path.display())
        })?,
        None => BUILTIN_POLICIES
            .iter()
            .find(|(name, _)| *name == config.plugin)
            .map(|(_, wasm)| wasm.to_vec())
            .ok_or_else(|| format!("`{}`: no built-in policy `{}`", config.name, config.plugin))?,
    };
    host.load_policy(config.name.as_str(), &wasm, limits_for(config, sandbox))
        .await
        .map(Arc::new)
        .map_err(|e| format!("`{}` (plugin `{}`) does not load: {e}", config.name, config.plugin))
}

/// The sandbox's limits with `config`'s own over them.
pub fn limits_for(config: &PolicyConfig, sandbox: &SandboxLimits) -> SandboxLimits {
    SandboxLimits {
        memory_bytes: config.memory_mb.map_or(sandbox.memory_bytes, |mb| (mb as usize) << 20),
        cpu_per_call: config.cpu_ms.map_or(sandbox.cpu_per_call, std::time::Duration::from_millis),
        wall_per_call: config.wall_ms.map_or(sandbox.wall_per_call, std::time::Duration::from_millis),
        ..sandbox.clone()
    }
}

/// Whether two definitions run the same component within the same limits.
pub fn same_component(a: &PolicyConfig, b: &PolicyConfig) -> bool {
    (&a.plugin, a.cpu_ms, a.wall_ms, a.memory_mb) == (&b.plugin, b.cpu_ms, b.wall_ms, b.memory_mb)
}

/// One client request under policy: who asks for what (the context every hook is given) and
/// what the policies did to it (its log rows' `policy`).
pub struct Policed {
    /// Global, the key's and the route's policies.
    pub chain: Chain,
    scene: Arc<Scene>,
    pub trail: Arc<Trail>,
}

/// The request as every policy sees it; never a credential.
struct Scene {
    request_id: String,
    key: String,
    route: Option<String>,
    requested_model: String,
}

/// Where an answer comes from: the source and the model it was sent.
#[derive(Clone, Copy)]
pub struct Origin<'a> {
    pub source: &'a str,
    pub model: &'a str,
}

/// The hook a decision came from, as the log and metrics name it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Hook {
    Request,
    Answer,
    Stream,
}

impl Hook {
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::Request => "request",
            Hook::Answer => "answer",
            Hook::Stream => "stream",
        }
    }
}

/// What one policy's verdict amounts to for the host.
enum Step {
    Pass,
    Rewrite(String),
    Refuse(ApiError),
}

impl Policed {
    pub fn new(chain: Chain, request_id: &str, key: &KeyEntry, route: Option<&str>, requested_model: &str) -> Policed {
        let scene = Scene {
            request_id: request_id.to_string(),
            key: key.name.to_string(),
            route: route.map(str::to_string),
            requested_model: requested_model.to_string(),
        };
        Policed { chain, scene: Arc::new(scene), trail: Arc::default() }
    }

    /// Runs `chain`'s request hooks in order on the unified `request`: the request to send
    /// (`None`: unchanged), or the refusal the client gets.
    pub async fn check_request(
        &self,
        gw: &Gateway,
        chain: &Chain,
        origin: Option<Origin<'_>>,
        request: &str,
    ) -> Result<Option<String>, ApiError> {
        let mut rewritten: Option<String> = None;
        for policy in chain.with(Hooks::REQUEST) {
            let text = rewritten.as_deref().unwrap_or(request);
            let verdict = policy.plugin.on_request(&context(&self.scene, policy, origin), text).await;
            match self.judge(gw, policy, Hook::Request, verdict.and_then(|v| json_object(policy, v))) {
                Step::Pass => {}
                Step::Rewrite(text) => rewritten = Some(text),
                Step::Refuse(error) => return Err(error),
            }
        }
        Ok(rewritten)
    }

    /// Runs `chain`'s answer hooks in order on a whole unified `answer`: the answer to give
    /// (`None`: unchanged), or the refusal.
    pub async fn check_answer(
        &self,
        gw: &Gateway,
        chain: &Chain,
        origin: Origin<'_>,
        answer: &str,
    ) -> Result<Option<String>, ApiError> {
        let mut rewritten: Option<String> = None;
        for policy in chain.with(Hooks::ANSWER) {
            let text = rewritten.as_deref().unwrap_or(answer);
            let verdict = policy.plugin.on_answer(&context(&self.scene, policy, Some(origin)), text).await;
            match self.judge(gw, policy, Hook::Answer, verdict.and_then(|v| json_object(policy, v))) {
                Step::Pass => {}
                Step::Rewrite(text) => rewritten = Some(text),
                Step::Refuse(error) => return Err(error),
            }
        }
        Ok(rewritten)
    }

    /// The stage a stream from `origin` passes through `chain`'s stream and finish hooks.
    pub fn guard(&self, gw: &Arc<Gateway>, chain: Chain, origin: Origin<'_>) -> Guard {
        Guard::new(self.stage(gw, chain, origin))
    }

    fn stage(&self, gw: &Arc<Gateway>, chain: Chain, origin: Origin<'_>) -> Stage {
        Stage {
            gw: Arc::clone(gw),
            hold_back: chain.hold_back(),
            chain,
            scene: Arc::clone(&self.scene),
            trail: Arc::clone(&self.trail),
            source: origin.source.to_string(),
            model: origin.model.to_string(),
        }
    }

    /// Tells `chain`'s finish hooks how a whole answer ended (in the background: the client
    /// does not wait on accounts).
    pub fn finished(&self, gw: &Arc<Gateway>, chain: &Chain, origin: Origin<'_>, finish: Finish) {
        self.stage(gw, chain.clone(), origin).finish(finish);
    }

    fn judge(&self, gw: &Gateway, policy: &Attached, hook: Hook, verdict: Result<Verdict, PolicyFailure>) -> Step {
        judge(gw, &self.trail, policy, hook, verdict)
    }
}

/// The context `policy` is handed, with its own settings.
fn context(scene: &Scene, policy: &Attached, origin: Option<Origin<'_>>) -> PolicyContext {
    PolicyContext {
        request_id: scene.request_id.clone(),
        key: scene.key.clone(),
        route: scene.route.clone(),
        requested_model: scene.requested_model.clone(),
        source: origin.map(|o| o.source.to_string()),
        resolved_model: origin.map(|o| o.model.to_string()),
        settings: policy.settings.clone(),
    }
}

/// A rewrite of a request or answer must still be a JSON object.
fn json_object(policy: &Attached, verdict: Verdict) -> Result<Verdict, PolicyFailure> {
    match &verdict {
        Verdict::Rewrite(text)
            if !text.trim_start().starts_with('{') || serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() =>
        {
            Err(PolicyFailure {
                policy: policy.name.to_string(),
                call: "rewrite",
                cause: crate::plugin::SandboxCause::Trap("its rewrite is not a JSON object".into()),
            })
        }
        _ => Ok(verdict),
    }
}

/// What `verdict` means for the request: recorded in `trail` and the metrics when it is more
/// than an allow; a failure is passed over or refuses by the policy's `on_error`.
fn judge(gw: &Gateway, trail: &Trail, policy: &Attached, hook: Hook, verdict: Result<Verdict, PolicyFailure>) -> Step {
    let note = |action: &'static str| {
        trail.add(&policy.name, hook, action);
        gw.metrics.policy_decision(policy.name.as_str(), hook.as_str(), action);
    };
    match verdict {
        Ok(Verdict::Allow) => Step::Pass,
        Ok(Verdict::Rewrite(text)) => {
            note("rewrite");
            Step::Rewrite(text)
        }
        Ok(Verdict::Deny(denial)) => {
            note("deny");
            Step::Refuse(refusal(&policy.name, denial))
        }
        Err(failure) => match policy.on_error {
            OnError::Open => {
                tracing::warn!("{failure}; passed over (on_error: open)");
                note("failed_open");
                Step::Pass
            }
            OnError::Closed => {
                tracing::warn!("{failure}; the request is refused (on_error: closed)");
                note("failed_closed");
                Step::Refuse(
                    ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        ErrorType::Api,
                        format!("policy `{}` could not check this request; try again later", policy.name),
                    )
                    .code("policy_failed"),
                )
            }
        },
    }
}

/// A policy's denial as the client's error: its status (403 when out of range), the error
/// type that status means, its code (`policy_denied` when empty) and its message.
fn refusal(policy: &PolicyName, denial: Denial) -> ApiError {
    let status = StatusCode::from_u16(denial.status).ok().filter(|s| s.is_client_error() || s.is_server_error());
    let status = status.unwrap_or(StatusCode::FORBIDDEN);
    let kind = match status.as_u16() {
        401 => ErrorType::Authentication,
        403 => ErrorType::Permission,
        404 => ErrorType::NotFound,
        429 => ErrorType::RateLimit,
        500..=599 => ErrorType::Api,
        _ => ErrorType::InvalidRequest,
    };
    let message = match denial.message.trim() {
        "" => format!("refused by policy `{policy}`"),
        message => message.to_string(),
    };
    let code = match denial.code.trim() {
        "" => "policy_denied".to_string(),
        code => code.chars().take(64).collect(),
    };
    ApiError::new(status, kind, message).code(code)
}

/// A stream's policies and what they need once the request's own future is gone.
struct Stage {
    gw: Arc<Gateway>,
    chain: Chain,
    hold_back: usize,
    scene: Arc<Scene>,
    trail: Arc<Trail>,
    source: String,
    model: String,
}

impl Stage {
    fn origin(&self) -> Origin<'_> {
        Origin { source: &self.source, model: &self.model }
    }

    /// `text` (held back plus the newest delta) through every stream hook, in order.
    async fn check_text(&self, mut text: String, last: bool) -> Result<String, ApiError> {
        for policy in self.chain.with(Hooks::STREAM) {
            let context = context(&self.scene, policy, Some(self.origin()));
            let verdict = policy.plugin.on_stream(&context, &text, last).await;
            match judge(&self.gw, &self.trail, policy, Hook::Stream, verdict) {
                Step::Pass => {}
                Step::Rewrite(rewritten) => text = rewritten,
                Step::Refuse(error) => return Err(error),
            }
        }
        Ok(text)
    }

    /// The finish hooks, each in the background.
    fn finish(&self, finish: Finish) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        for policy in self.chain.with(Hooks::FINISH) {
            let policy = Arc::clone(policy);
            let context = context(&self.scene, &policy, Some(self.origin()));
            runtime.spawn(async move {
                if let Err(e) = policy.plugin.on_finish(&context, finish).await {
                    tracing::warn!("{e}");
                }
            });
        }
    }
}

/// How an answer ended, with its tokens, for the finish hooks.
pub fn finish(outcome: Outcome, input_tokens: u64, output_tokens: u64) -> Finish {
    Finish { outcome, input_tokens, output_tokens }
}
