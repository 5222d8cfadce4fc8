//! Policy components (`wit/policy`): their bindings, their limits and their instances. Calls
//! are stateless, so each takes a warm instance alone; every call is bounded in CPU, memory
//! and wall-clock time, and an instance that fails is dropped, never reused.

use std::sync::{Arc, Mutex};

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store};

use super::bindings::GuestState;
use super::{PluginHost, SandboxCause, SandboxLimits};
use crate::config::AdapterName;

mod bindings {
    wasmtime::component::bindgen!({
        world: "policy-world",
        path: "wit/policy",
        exports: { default: async },
    });
}

pub use bindings::exports::switchyard::policy::policy::{Context, Finish, Metadata, Verdict};
pub use bindings::switchyard::policy::types::{Denial, Hooks, Outcome};
use bindings::{PolicyWorld, PolicyWorldPre};

/// Instances of one policy kept warm between calls; a burst past this makes more for a while.
const WARM_INSTANCES: usize = 4;

/// Why a policy call gave no verdict: its sandbox's bound, a trap, or an answer out of bounds.
#[derive(Debug, thiserror::Error)]
#[error("policy `{policy}` {call}: {cause}")]
pub struct PolicyFailure {
    pub policy: String,
    pub call: &'static str,
    pub cause: SandboxCause,
}

/// A loaded policy component: what it declared, and instances ready to call.
pub struct PolicyPlugin {
    name: String,
    metadata: Metadata,
    pre: PolicyWorldPre<GuestState>,
    engine: Engine,
    limits: SandboxLimits,
    warm: Mutex<Vec<Warm>>,
}

struct Warm {
    store: Store<GuestState>,
    world: PolicyWorld,
}

impl PolicyPlugin {
    /// The name it was loaded under (the built-in's or the file's).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    pub fn has(&self, hook: Hooks) -> bool {
        self.metadata.hooks.contains(hook)
    }

    /// Characters of streamed text it asks the host to hold back.
    pub fn hold_back(&self) -> usize {
        self.metadata.hold_back.min(MAX_HOLD_BACK) as usize
    }

    pub async fn on_request(&self, context: &Context, request: &str) -> Result<Verdict, PolicyFailure> {
        let mut warm = self.checkout("on-request").await?;
        warm.store.set_epoch_deadline(self.limits.deadline_ticks_for(request.len()));
        let call = warm.world.switchyard_policy_policy().call_on_request(&mut warm.store, context, request);
        let result = tokio::time::timeout(self.limits.wall_per_call, call).await;
        self.settle(warm, "on-request", result).and_then(|v| self.bounded("on-request", v))
    }

    pub async fn on_answer(&self, context: &Context, answer: &str) -> Result<Verdict, PolicyFailure> {
        let mut warm = self.checkout("on-answer").await?;
        warm.store.set_epoch_deadline(self.limits.deadline_ticks_for(answer.len()));
        let call = warm.world.switchyard_policy_policy().call_on_answer(&mut warm.store, context, answer);
        let result = tokio::time::timeout(self.limits.wall_per_call, call).await;
        self.settle(warm, "on-answer", result).and_then(|v| self.bounded("on-answer", v))
    }

    pub async fn on_stream(&self, context: &Context, text: &str, last: bool) -> Result<Verdict, PolicyFailure> {
        let mut warm = self.checkout("on-stream").await?;
        warm.store.set_epoch_deadline(self.limits.deadline_ticks_for(text.len()));
        let call = warm.world.switchyard_policy_policy().call_on_stream(&mut warm.store, context, text, last);
        let result = tokio::time::timeout(self.limits.wall_per_call, call).await;
        self.settle(warm, "on-stream", result).and_then(|v| self.bounded("on-stream", v))
    }

    pub async fn on_finish(&self, context: &Context, finish: Finish) -> Result<(), PolicyFailure> {
        let mut warm = self.checkout("on-finish").await?;
        warm.store.set_epoch_deadline(self.limits.deadline_ticks());
        let call = warm.world.switchyard_policy_policy().call_on_finish(&mut warm.store, context, finish);
        let result = tokio::time::timeout(self.limits.wall_per_call, call).await;
        self.settle(warm, "on-finish", result)
    }

    async fn checkout(&self, call: &'static str) -> Result<Warm, PolicyFailure> {
        let idle = self.warm.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match idle {
            Some(warm) => Ok(warm),
            None => self.instantiate().await.map_err(|cause| self.failure(call, cause)),
        }
    }

    async fn instantiate(&self) -> Result<Warm, SandboxCause> {
        let state = GuestState::new(AdapterName::new(&self.name), self.limits.memory_bytes, None, Arc::from([]));
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(self.limits.deadline_ticks());
        match self.pre.instantiate_async(&mut store).await {
            Ok(world) => Ok(Warm { store, world }),
            Err(e) => Err(super::session::trap_cause(&e, store.data(), &self.limits)),
        }
    }

    /// The call's value; a healthy instance goes back to the warm ones, a failed one is dropped.
    fn settle<R>(
        &self,
        warm: Warm,
        call: &'static str,
        result: Result<wasmtime::Result<R>, tokio::time::error::Elapsed>,
    ) -> Result<R, PolicyFailure> {
        match result {
            Ok(Ok(value)) => {
                if !warm.store.data().limiter.is_bloated() {
                    let mut idle = self.warm.lock().unwrap_or_else(|p| p.into_inner());
                    if idle.len() < WARM_INSTANCES {
                        idle.push(warm);
                    }
                }
                Ok(value)
            }
            Ok(Err(e)) => Err(self.failure(call, super::session::trap_cause(&e, warm.store.data(), &self.limits))),
            Err(_) => Err(self.failure(call, SandboxCause::WallLimit(self.limits.wall_per_call))),
        }
    }

    /// A rewrite larger than the sandbox's output cap is a failure, not an answer.
    fn bounded(&self, call: &'static str, verdict: Verdict) -> Result<Verdict, PolicyFailure> {
        let limit = self.limits.max_output_bytes;
        match &verdict {
            Verdict::Rewrite(text) if text.len() > limit => {
                Err(self.failure(call, SandboxCause::OutputTooLarge { bytes: text.len(), limit }))
            }
            Verdict::Deny(denial) if denial.message.len() > MAX_DENIAL_BYTES => Err(self
                .failure(call, SandboxCause::OutputTooLarge { bytes: denial.message.len(), limit: MAX_DENIAL_BYTES })),
            _ => Ok(verdict),
        }
    }

    fn failure(&self, call: &'static str, cause: SandboxCause) -> PolicyFailure {
        PolicyFailure { policy: self.name.clone(), call, cause }
    }
}

/// The most streamed text a policy may hold back from the client.
pub const MAX_HOLD_BACK: u32 = 4096;

/// Takes from `held` all but its last `keep` characters: what of a stream's held text may go
/// to the client now (counted in characters, cut on their boundaries).
pub fn release_held(held: &mut String, keep: usize) -> String {
    if keep == 0 {
        return std::mem::take(held);
    }
    match held.char_indices().rev().nth(keep - 1) {
        Some((at, _)) => {
            let tail = held.split_off(at);
            std::mem::replace(held, tail)
        }
        None => String::new(),
    }
}

/// The longest message a denial may carry to the client.
const MAX_DENIAL_BYTES: usize = 4096;

/// Links the policy world's imports (WASI is linked for adapters already).
pub(super) fn link(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    PolicyWorld::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |state| state)
}

impl PluginHost {
    /// Compiles (through the component cache) and checks a policy component: it must export
    /// the policy interface and describe itself within its limits.
    pub async fn load_policy(&self, name: &str, wasm: &[u8], limits: SandboxLimits) -> Result<PolicyPlugin, String> {
        let (component, _) = self
            .cache
            .load(&self.engine, &format!("policy-{name}"), wasm)
            .map_err(|e| format!("not a valid WebAssembly component: {e}"))?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .and_then(PolicyWorldPre::new)
            .map_err(|e| format!("not a policy component (world `switchyard:policy/policy-world@0.1.0`): {e:#}"))?;
        let mut plugin = PolicyPlugin {
            name: name.to_string(),
            metadata: Metadata { name: String::new(), version: String::new(), hooks: Hooks::empty(), hold_back: 0 },
            pre,
            engine: self.engine.clone(),
            limits,
            warm: Mutex::new(Vec::new()),
        };
        let mut warm = plugin.instantiate().await.map_err(|cause| plugin.failure("instantiate", cause).to_string())?;
        warm.store.set_epoch_deadline(plugin.limits.deadline_ticks());
        let call = warm.world.switchyard_policy_policy().call_describe(&mut warm.store);
        let described = tokio::time::timeout(plugin.limits.wall_per_call, call).await;
        plugin.metadata = plugin.settle(warm, "describe", described).map_err(|e| e.to_string())?;
        Ok(plugin)
    }
}

impl bindings::switchyard::policy::types::Host for GuestState {}

impl bindings::switchyard::policy::host::Host for GuestState {
    fn log(&mut self, level: bindings::switchyard::policy::host::LogLevel, message: String) {
        use bindings::switchyard::policy::host::LogLevel;
        let policy = self.adapter.as_str();
        // A chatty policy cannot flood the log: each line is capped.
        let message: String = message.chars().take(2000).collect();
        match level {
            LogLevel::Trace => tracing::trace!(policy, "{message}"),
            LogLevel::Debug => tracing::debug!(policy, "{message}"),
            LogLevel::Info => tracing::info!(policy, "{message}"),
            LogLevel::Warn => tracing::warn!(policy, "{message}"),
            LogLevel::Error => tracing::error!(policy, "{message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::release_held;

    #[test]
    fn release_keeps_the_last_characters_back() {
        let mut held = "write to bob@exa".to_string();
        assert_eq!(release_held(&mut held, 7), "write to ");
        assert_eq!(held, "bob@exa");
        let mut short = "héé".to_string();
        assert_eq!(release_held(&mut short, 7), "", "shorter than the hold-back: all of it stays");
        assert_eq!(short, "héé");
        let mut wide = "aé€😀b".to_string();
        assert_eq!(release_held(&mut wide, 2), "aé€", "counted in characters, cut on their boundaries");
        assert_eq!(wide, "😀b");
        let mut all = "text".to_string();
        assert_eq!(release_held(&mut all, 0), "text");
        assert!(all.is_empty());
    }
}
