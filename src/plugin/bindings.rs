//! Host side of the WIT world: generated bindings, the exports an instance has, the per-store
//! state, and the imports (log, clock, script, allow-listed fetch) a guest gets. WASI is linked with an empty context: no files, env or sockets.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::config::AdapterName;

// Exports are async so guest calls run on a fiber: WASI's host side (e.g. a panicking guest
// writing to stderr) is tokio-based and must not block a runtime worker.
// The richest world is generated; a component is loaded interface by interface, so one that
// exports only `adapter-world` (no `native`, no `models`) runs too.
wasmtime::component::bindgen!({
    world: "full-adapter-world",
    path: "wit",
    exports: { default: async },
    // The one import that waits on the network yields the worker instead of blocking it.
    imports: { "switchyard:adapter/host.fetch": async },
});

pub use self::switchyard::adapter::types::{
    AdapterError as GuestError, ErrorKind, HttpRequest, HttpResponse, Operation, StreamEvent, StreamFraming,
    StreamOutput,
};
pub use exports::switchyard::adapter::adapter::{Metadata, SourceContext};
pub use exports::switchyard::adapter::native::{ClientRequest, NativeOutput, NativeProtocol, NativeResponse};

use exports::switchyard::adapter::{adapter, models, native};

/// A component's `native` interface.
pub type NativeGuest = native::Guest;

/// The interfaces one instance exports: always `adapter`; `native` and `models` when the
/// component has them.
pub struct Exports {
    pub adapter: adapter::Guest,
    pub native: Option<native::Guest>,
    pub models: Option<models::Guest>,
}

/// A linked component and where its exports are, found once per component.
#[derive(Clone)]
pub struct ExportsPre {
    pre: wasmtime::component::InstancePre<GuestState>,
    adapter: adapter::GuestIndices,
    native: Option<native::GuestIndices>,
    models: Option<models::GuestIndices>,
}

impl ExportsPre {
    pub fn new(pre: wasmtime::component::InstancePre<GuestState>) -> Result<ExportsPre> {
        let adapter = adapter::GuestIndices::new(&pre)?;
        // Absent is fine (an adapter-world component); present but malformed is not.
        let exports = |name: &str| pre.component().get_export_index(None, name).is_some();
        let native = match exports("switchyard:adapter/native@0.1.0") {
            false => None,
            true => Some(native::GuestIndices::new(&pre)?),
        };
        let models = match exports("switchyard:adapter/models@0.1.0") {
            false => None,
            true => Some(models::GuestIndices::new(&pre)?),
        };
        Ok(ExportsPre { pre, adapter, native, models })
    }

    pub async fn instantiate_async(&self, store: &mut wasmtime::Store<GuestState>) -> Result<Exports> {
        let instance = self.pre.instantiate_async(&mut *store).await?;
        let adapter = self.adapter.load(&mut *store, &instance)?;
        let native = match &self.native {
            Some(indices) => Some(indices.load(&mut *store, &instance)?),
            None => None,
        };
        let models = match &self.models {
            Some(indices) => Some(indices.load(&mut *store, &instance)?),
            None => None,
        };
        Ok(Exports { adapter, native, models })
    }
}

impl ErrorKind {
    /// As the WIT spells it (`rate-limit`), which is how authors write it in test cases.
    pub fn wit_name(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad-request",
            ErrorKind::Auth => "auth",
            ErrorKind::Permission => "permission",
            ErrorKind::NotFound => "not-found",
            ErrorKind::RateLimit => "rate-limit",
            ErrorKind::Quota => "quota",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::Server => "server",
            ErrorKind::ContentPolicy => "content-policy",
            ErrorKind::InvalidResponse => "invalid-response",
            ErrorKind::Truncated => "truncated",
            ErrorKind::Unsupported => "unsupported",
        }
    }
}

impl From<ErrorKind> for crate::domain::FailureKind {
    fn from(kind: ErrorKind) -> Self {
        use crate::domain::FailureKind as K;
        match kind {
            ErrorKind::BadRequest => K::BadRequest,
            ErrorKind::Auth => K::Auth,
            ErrorKind::Permission => K::Permission,
            ErrorKind::NotFound => K::NotFound,
            ErrorKind::RateLimit => K::RateLimit,
            ErrorKind::Quota => K::Quota,
            ErrorKind::Overloaded => K::Overloaded,
            ErrorKind::Server => K::Server,
            ErrorKind::ContentPolicy => K::ContentPolicy,
            ErrorKind::InvalidResponse => K::InvalidResponse,
            ErrorKind::Truncated => K::Truncated,
            ErrorKind::Unsupported => K::Unsupported,
        }
    }
}

/// Everything one store (one pooled instance) owns.
pub struct GuestState {
    pub adapter: AdapterName,
    wasi: WasiCtx,
    table: ResourceTable,
    pub limiter: MemoryLimiter,
    /// The script a script-hosting component runs (the Lua-compat one).
    script: Option<Arc<str>>,
    /// Hosts this adapter may reach through `fetch`; empty: none.
    allow_hosts: Arc<[String]>,
    /// Epoch ticks spent waiting in `fetch`, given back to the guest's CPU budget once.
    pub waited_ticks: u64,
    /// The last error the guest logged (why a script did not load, say).
    pub last_error: Option<String>,
    /// What `now-unix-ms` answers instead of the system clock (recorded test cases).
    pub fixed_now_ms: Option<u64>,
}

impl GuestState {
    pub fn new(
        adapter: AdapterName,
        memory_bytes: usize,
        script: Option<Arc<str>>,
        allow_hosts: Arc<[String]>,
    ) -> Self {
        GuestState {
            adapter,
            // Nothing inherited: no args, env, preopened dirs, stdio or network.
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter { max_bytes: memory_bytes, total_bytes: 0, hit: false },
            script,
            allow_hosts,
            waited_ticks: 0,
            last_error: None,
            fixed_now_ms: None,
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Caps the memory of the whole instance (every linear memory it has, summed), refuses growth
/// past it and remembers that it did, so a trap can be named.
pub struct MemoryLimiter {
    max_bytes: usize,
    /// All linear memories of the store; they only grow, so this is also the peak.
    total_bytes: usize,
    pub hit: bool,
}

/// Memory past which an instance is retired rather than pooled: what it grew to stays
/// committed while it idles (the cap, sized for the largest body, is far above this).
const POOLED_MEMORY_BYTES: usize = 32 << 20;

impl MemoryLimiter {
    /// Linear memory the instance holds now (every memory, summed).
    pub fn bytes(&self) -> usize {
        self.total_bytes
    }

    /// Whether the instance grew past what an idle pooled instance may keep.
    pub fn is_bloated(&self) -> bool {
        self.total_bytes > POOLED_MEMORY_BYTES.min(self.max_bytes / 2)
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> Result<bool> {
        let total = self.total_bytes.saturating_add(desired.saturating_sub(current));
        if total > self.max_bytes {
            self.hit = true;
            return Ok(false);
        }
        self.total_bytes = total;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> Result<bool> {
        Ok(desired <= 100_000)
    }
}

impl self::switchyard::adapter::types::Host for GuestState {}

impl self::switchyard::adapter::host::Host for GuestState {
    fn log(&mut self, level: self::switchyard::adapter::host::LogLevel, message: String) {
        use self::switchyard::adapter::host::LogLevel;
        let adapter = self.adapter.as_str();
        // Guests may log a lot; cap each line so a chatty guest cannot flood the log.
        let message: String = message.chars().take(2000).collect();
        match level {
            LogLevel::Trace => tracing::trace!(adapter, "{message}"),
            LogLevel::Debug => tracing::debug!(adapter, "{message}"),
            LogLevel::Info => tracing::info!(adapter, "{message}"),
            LogLevel::Warn => tracing::warn!(adapter, "{message}"),
            LogLevel::Error => {
                tracing::error!(adapter, "{message}");
                self.last_error = Some(message);
            }
        }
    }

    fn now_unix_ms(&mut self) -> u64 {
        if let Some(fixed) = self.fixed_now_ms {
            return fixed;
        }
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
    }

    fn script(&mut self) -> Option<String> {
        self.script.as_deref().map(str::to_string)
    }

    async fn fetch(
        &mut self,
        method: String,
        url: String,
        body: Option<String>,
    ) -> Result<self::switchyard::adapter::host::FetchReply, String> {
        let host = reqwest::Url::parse(&url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_default();
        let allowed = reqwest::Url::parse(&url)
            .map_err(|_| format!("`{url}` is not an http(s) URL"))
            .and_then(|u| super::fetch::denial(&self.allow_hosts, &u).map_or(Ok(()), Err));
        if let Err(denied) = allowed {
            tracing::warn!(adapter = %self.adapter, host = %crate::logsafe::Escaped(&host), "adapter HTTP request denied");
            return Err(format!(
                "{denied}: the operator has not allowed it for adapter `{}` (adapters.{}.allow_hosts; a port other than 80/443 must be named, as host:port)",
                self.adapter, self.adapter
            ));
        }
        let started = std::time::Instant::now();
        let reply = super::fetch::run(self.allow_hosts.clone(), &method, &url, body).await;
        self.waited_ticks = super::engine::ticks_in(started.elapsed());
        tracing::info!(adapter = %self.adapter, host = %crate::logsafe::Escaped(&host), ms = started.elapsed().as_millis() as u64, ok = reply.is_ok(), "adapter HTTP request");
        reply.map(|(status, body)| self::switchyard::adapter::host::FetchReply { status, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_cap_counts_every_memory_of_the_instance() {
        let mut limiter = MemoryLimiter { max_bytes: 64 << 20, total_bytes: 0, hit: false };
        assert!(limiter.memory_growing(0, 40 << 20, None).unwrap(), "the first memory");
        assert!(!limiter.memory_growing(0, 40 << 20, None).unwrap(), "a second memory may not double the cap");
        assert!(limiter.hit);
        assert!(!limiter.memory_growing(40 << 20, 65 << 20, None).unwrap(), "nor may growth past it");
        assert!(limiter.memory_growing(0, 24 << 20, None).unwrap(), "what is left is left");
    }
}
