//! The plugin host: loads adapters (built-in components, overrides from `adapter_dir`),
//! compiles them once through the disk cache, and opens pooled, bounded sessions.

mod bindings;
mod cache;
mod catalog;
mod engine;
mod error;
mod fetch;
mod lua;
mod policy;
mod pool;
mod session;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store};

pub use crate::domain::{AdapterGrant, SandboxLimits};
pub use bindings::{
    ClientRequest, ErrorKind, GuestError, HttpRequest, HttpResponse, Metadata, NativeOutput, NativeProtocol,
    NativeResponse, Operation, SourceContext, StreamEvent, StreamFraming, StreamOutput,
};
pub use cache::CacheOutcome;
pub use catalog::{AdapterOrigin, BUILTIN_ADAPTERS, BUILTIN_POLICIES};
pub use error::{GuestCall, SandboxCause, SandboxError};
pub use lua::BUNDLED_SCRIPTS;
pub use policy::{
    Context as PolicyContext, Denial, Finish, Hooks, MAX_HOLD_BACK, Outcome, PolicyFailure, PolicyPlugin, Verdict,
    release_held,
};
pub use session::{AdapterSession, GuestResult};

use bindings::{ExportsPre, FullAdapterWorld, GuestState};
use cache::ComponentCache;
use engine::EpochTicker;
pub use engine::MAX_CORE_INSTANCES;
pub use pool::{IDLE_INSTANCE_TTL, PoolStats};
use pool::{Instance, InstancePool};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::exponential_buckets;

use crate::telemetry::Histogram;

use crate::config::AdapterName;

/// How long a request waits for a free instance before the attempt fails.
const CHECKOUT_WAIT: Duration = Duration::from_secs(30);

/// One loaded adapter: its compiled component, ready to instantiate, and its pool.
pub struct Adapter {
    name: AdapterName,
    origin: AdapterOrigin,
    metadata: Metadata,
    /// A Lua adapter's script (its instances run the Lua-compat component).
    script: Option<Arc<str>>,
    allow_hosts: Arc<[String]>,
    /// The client protocols it forwards untranslated (`native` interface), with the client
    /// headers each one is handed.
    native: Vec<NativeProtocol>,
    pre: ExportsPre,
    engine: Engine,
    limits: Arc<SandboxLimits>,
    pool: Arc<InstancePool>,
    /// Time of each kind of guest call (filled in once the adapter has its name).
    call_times: CallTimes,
}

/// Guest call durations per adapter and call, shared with the metrics registry.
pub type CallDurations = Family<CallLabels, Histogram, fn() -> Histogram>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub adapter: String,
    pub call: &'static str,
}

fn call_histogram() -> Histogram {
    // 50 µs to ~1.6 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// One adapter's histograms, one per kind of call, taken from the family once.
#[derive(Clone, Default)]
struct CallTimes(Vec<(GuestCall, Histogram)>);

impl CallTimes {
    fn of(durations: &CallDurations, adapter: &AdapterName) -> CallTimes {
        let calls = [
            GuestCall::TransformRequest,
            GuestCall::TransformResponse,
            GuestCall::TransformStreamChunk,
            GuestCall::FinishStream,
        ];
        CallTimes(
            calls
                .into_iter()
                .map(|call| {
                    let labels = CallLabels { adapter: adapter.to_string(), call: call.name() };
                    (call, durations.get_or_create(&labels).clone())
                })
                .collect(),
        )
    }

    fn observe(&self, call: GuestCall, took: std::time::Duration) {
        if let Some((_, h)) = self.0.iter().find(|(c, _)| *c == call) {
            h.observe(took.as_secs_f64());
        }
    }
}

impl Adapter {
    pub fn name(&self) -> &AdapterName {
        &self.name
    }

    pub fn origin(&self) -> &AdapterOrigin {
        &self.origin
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Its pool now: sessions it may hold, instances, idle instances, sessions open.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Bounds the sessions open at once (its instances follow, `sessions_per_instance` each).
    pub fn set_pool_capacity(&self, capacity: usize) {
        self.pool.set_capacity(capacity);
    }

    /// Lets go of instances idle for [`IDLE_INSTANCE_TTL`] before `now`, keeping one warm.
    pub fn shrink_idle_pool(&self, now: std::time::Instant) -> usize {
        self.pool.shrink_idle(now)
    }

    /// The client headers handed over when it forwards `protocol` natively; `None` when it
    /// does not forward that protocol.
    pub fn native_headers(&self, protocol: &str) -> Option<&[String]> {
        self.native.iter().find(|p| p.name == protocol).map(|p| p.headers.as_slice())
    }

    /// The client protocols it forwards natively.
    pub fn native_protocols(&self) -> impl Iterator<Item = &str> {
        self.native.iter().map(|p| p.name.as_str())
    }

    /// Checks out an instance (warm if one is idle) and opens a guest session on it.
    pub async fn open_session(self: &Arc<Self>, context: &SourceContext) -> Result<AdapterSession, SandboxError> {
        self.open_session_at(context, None, false).await
    }

    /// Opens a native session (see [`Adapter::native_headers`]): the client's request as sent.
    pub async fn open_native_session(
        self: &Arc<Self>,
        context: &SourceContext,
    ) -> Result<AdapterSession, SandboxError> {
        self.open_session_at(context, None, true).await
    }

    /// `open_session` (or a native one) with the guest's clock fixed at `now_ms` for the whole
    /// session (recorded test cases replay with the time they were written with).
    pub async fn open_session_at(
        self: &Arc<Self>,
        context: &SourceContext,
        now_ms: Option<u64>,
        native: bool,
    ) -> Result<AdapterSession, SandboxError> {
        let place =
            self.pool.acquire(CHECKOUT_WAIT).await.ok_or_else(|| {
                self.sandbox_error(GuestCall::OpenSession, SandboxCause::PoolExhausted(CHECKOUT_WAIT))
            })?;
        let seat = self.pool.seat(place, || self.instantiate()).await?;
        let mut session = AdapterSession::new(self.clone(), seat, native, now_ms);
        session.open(context).await?;
        Ok(session)
    }

    /// Asks the adapter (on a fresh instance, outside any session) for the request that lists
    /// its upstream's models; `None` when the component exports no `models` interface.
    pub async fn models_request(&self, context: &SourceContext) -> Option<GuestResult<HttpRequest>> {
        let mut instance = match self.instantiate().await {
            Ok(instance) => instance,
            Err(e) => return Some(Err(e)),
        };
        let models = instance.world.models.take()?;
        instance.store.set_epoch_deadline(self.limits.deadline_ticks());
        let call = models.call_list_request(&mut instance.store, context);
        Some(self.settle_alone(tokio::time::timeout(self.limits.wall_per_call, call).await, &instance))
    }

    /// The model ids in the upstream's answer to [`Adapter::models_request`].
    pub async fn read_models(&self, context: &SourceContext, response: &HttpResponse) -> GuestResult<Vec<String>> {
        let mut instance = self.instantiate().await?;
        let Some(models) = instance.world.models.take() else {
            let cause = SandboxCause::Trap("the component exports no `models` interface".into());
            return Err(self.sandbox_error(GuestCall::ListModels, cause));
        };
        instance.store.set_epoch_deadline(self.limits.deadline_ticks_for(response.body.len()));
        let call = models.call_read_list(&mut instance.store, context, response);
        self.settle_alone(tokio::time::timeout(self.limits.wall_per_call, call).await, &instance)
    }

    /// A call on an instance of its own (no session): its trap or time-out named.
    fn settle_alone<R>(
        &self,
        result: Result<wasmtime::Result<R>, tokio::time::error::Elapsed>,
        instance: &Instance,
    ) -> Result<R, SandboxError> {
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(self.sandbox_error(GuestCall::ListModels, self.trap_cause(&e, instance.store.data()))),
            Err(_) => {
                Err(self.sandbox_error(GuestCall::ListModels, SandboxCause::WallLimit(self.limits.wall_per_call)))
            }
        }
    }

    /// The limits its instances run under (the defaults with the operator's grant).
    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// Opens a session on a new instance, never a pooled one, and times it (`adapter check`).
    pub async fn cold_start(self: &Arc<Self>, context: &SourceContext) -> Result<std::time::Duration, SandboxError> {
        let started = std::time::Instant::now();
        let mut instance = self.instantiate().await?;
        instance.store.set_epoch_deadline(self.limits.deadline_ticks());
        let opened = instance.world.adapter.session().call_constructor(&mut instance.store, context).await;
        match opened {
            Ok(_) => Ok(started.elapsed()),
            Err(e) => Err(self.sandbox_error(GuestCall::OpenSession, self.trap_cause(&e, instance.store.data()))),
        }
    }

    /// A Lua adapter's script.
    pub fn script(&self) -> Option<&str> {
        self.script.as_deref()
    }

    /// Whether this adapter runs a Lua script.
    pub fn is_lua(&self) -> bool {
        self.script.is_some()
    }

    async fn instantiate(&self) -> Result<Instance, SandboxError> {
        let state =
            GuestState::new(self.name.clone(), self.limits.memory_bytes, self.script.clone(), self.allow_hosts.clone());
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        // Past the deadline the guest traps, unless it spent that time waiting in an allowed
        // `fetch`: that wait is given back once.
        store.epoch_deadline_callback(|mut ctx| match std::mem::take(&mut ctx.data_mut().waited_ticks) {
            0 => Err(wasmtime::Trap::Interrupt.into()),
            waited => Ok(wasmtime::UpdateDeadline::Continue(waited)),
        });
        store.set_epoch_deadline(self.limits.deadline_ticks());
        match self.pre.instantiate_async(&mut store).await {
            Ok(world) => Ok(Instance { store, world }),
            Err(e) => Err(self.sandbox_error(GuestCall::Instantiate, self.trap_cause(&e, store.data()))),
        }
    }

    fn sandbox_error(&self, call: GuestCall, cause: SandboxCause) -> SandboxError {
        SandboxError { adapter: self.name.clone(), call, cause }
    }

    fn trap_cause(&self, error: &wasmtime::Error, state: &GuestState) -> SandboxCause {
        session::trap_cause(error, state, &self.limits)
    }
}

/// A problem with one adapter file that did not stop the others from loading.
#[derive(Debug, Clone)]
pub struct LoadWarning {
    pub file: PathBuf,
    pub message: String,
}

/// The engine, the linker, and every adapter by name.
pub struct PluginHost {
    engine: Engine,
    /// What the operator grants each adapter (config `adapters.NAME`): hosts and limits.
    grants: HashMap<AdapterName, AdapterGrant>,
    linker: Linker<GuestState>,
    limits: Arc<SandboxLimits>,
    cache: ComponentCache,
    /// The adapters in use, swapped whole when one is uploaded or deleted.
    adapters: ArcSwap<HashMap<AdapterName, Arc<Adapter>>>,
    /// The built-ins, for when an override of one is deleted.
    builtins: HashMap<AdapterName, Arc<Adapter>>,
    /// The Lua-compat component, linked once for every script.
    lua_pre: std::sync::OnceLock<ExportsPre>,
    /// Every adapter's guest call durations (the metrics registry reads the same family).
    call_durations: CallDurations,
    _ticker: EpochTicker,
}

/// What loading cost, for logs and benchmarks.
#[derive(Debug, Default, Clone)]
pub struct LoadReport {
    pub compiled: usize,
    pub cache_hits: usize,
    pub warnings: Vec<LoadWarning>,
}

impl PluginHost {
    /// Builds the engine and loads the built-ins, then every `*.wasm` in `adapter_dir`
    /// (a file named like a built-in overrides it). `cache_dir: None` disables the disk cache.
    /// Guest call durations per adapter and call (for `GET /metrics`).
    pub fn call_durations(&self) -> CallDurations {
        self.call_durations.clone()
    }

    pub async fn load(
        limits: SandboxLimits,
        cache_dir: Option<PathBuf>,
        adapter_dir: Option<&Path>,
        grants: HashMap<AdapterName, AdapterGrant>,
    ) -> anyhow::Result<(PluginHost, LoadReport)> {
        let max_memory = grants.values().filter_map(|g| g.memory_bytes).fold(limits.memory_bytes, usize::max);
        let engine = engine::build_engine(&limits, max_memory)
            .map_err(|e| anyhow::anyhow!("cannot start the WebAssembly engine: {e}"))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow::anyhow!("linking WASI: {e}"))?;
        FullAdapterWorld::add_to_linker::<GuestState, HasSelf<GuestState>>(&mut linker, |state| state)
            .map_err(|e| anyhow::anyhow!("linking host imports: {e}"))?;
        policy::link(&mut linker).map_err(|e| anyhow::anyhow!("linking the policy imports: {e}"))?;
        let mut host = PluginHost {
            grants,
            cache: ComponentCache::new(cache_dir, &engine),
            _ticker: EpochTicker::start(&engine),
            engine,
            linker,
            limits: Arc::new(limits),
            adapters: ArcSwap::default(),
            builtins: HashMap::new(),
            lua_pre: std::sync::OnceLock::new(),
            call_durations: Family::new_with_constructor(call_histogram),
        };
        let mut report = LoadReport::default();
        for (name, wasm) in BUILTIN_ADAPTERS {
            let adapter = host
                .compile(AdapterName::new(*name), AdapterOrigin::Builtin, wasm, None, &mut report)
                .await
                .map_err(|e| anyhow::anyhow!("built-in adapter `{name}` does not load: {e}"))?;
            host.builtins.insert(adapter.name.clone(), Arc::new(adapter));
        }
        host.adapters.store(Arc::new(host.builtins.clone()));
        if let Some(dir) = adapter_dir {
            if let Err(e) = lua::write_bundled(dir) {
                report.warnings.push(LoadWarning {
                    file: dir.to_path_buf(),
                    message: format!("cannot write the bundled Lua scripts: {e}"),
                });
            }
            for file in catalog::adapter_files(dir, &mut report.warnings) {
                host.load_file(&file, &mut report).await;
            }
        }
        Ok((host, report))
    }

    /// Loads one `.wasm` file, replacing a same-named adapter; a failure leaves the old one.
    pub async fn load_file(&self, file: &Path, report: &mut LoadReport) -> bool {
        let Some(name) = file.file_stem().and_then(|s| s.to_str()).map(AdapterName::new) else {
            return false;
        };
        let origin = AdapterOrigin::File(file.to_path_buf());
        let loaded = match std::fs::read(file) {
            Ok(script) if file.extension().is_some_and(|x| x == "lua") => match String::from_utf8(script) {
                Ok(script) => self.compile(name.clone(), origin, lua::COMPONENT, Some(script.into()), report).await,
                Err(_) => Err("a Lua script must be UTF-8 text".to_string()),
            },
            Ok(wasm) => self.compile(name.clone(), origin, &wasm, None, report).await,
            Err(e) => Err(format!("cannot read it: {e}")),
        };
        match loaded {
            Ok(adapter) => {
                if self.builtins.contains_key(&name) {
                    tracing::info!(file = %file.display(), "adapter `{name}` from adapter_dir overrides the built-in");
                }
                self.put(Arc::new(adapter));
                true
            }
            Err(message) => {
                let fallback = if self.adapters.load().contains_key(&name) {
                    format!("; keeping the built-in `{name}`")
                } else {
                    String::new()
                };
                let message = format!("{message}{fallback}");
                tracing::warn!(file = %file.display(), "adapter file skipped: {message}");
                report.warnings.push(LoadWarning { file: file.to_path_buf(), message });
                false
            }
        }
    }

    async fn compile(
        &self,
        name: AdapterName,
        origin: AdapterOrigin,
        wasm: &[u8],
        script: Option<Arc<str>>,
        report: &mut LoadReport,
    ) -> Result<Adapter, String> {
        // Every Lua script runs the same component: prepare it once.
        let pre = match (&script, self.lua_pre.get()) {
            (Some(_), Some(pre)) => pre.clone(),
            _ => {
                let compiled_as = if script.is_some() { "lua-compat" } else { name.as_str() };
                let pre = self.prepare(compiled_as, wasm, report)?;
                if script.is_some() {
                    let _ = self.lua_pre.set(pre.clone());
                }
                pre
            }
        };
        let grant = self.grants.get(&name).cloned().unwrap_or_default();
        let limits = Arc::new(self.limits.granted(&grant));
        let limits_per_instance = limits.sessions_per_instance;
        let mut adapter = Adapter {
            name,
            origin,
            metadata: Metadata {
                name: String::new(),
                version: String::new(),
                protocol: String::new(),
                stream_framing: StreamFraming::Sse,
            },
            allow_hosts: grant.allow_hosts.into(),
            script,
            native: Vec::new(),
            pre,
            engine: self.engine.clone(),
            limits,
            pool: Arc::new(InstancePool::new(1, limits_per_instance)),
            call_times: CallTimes::default(),
        };
        adapter.call_times = CallTimes::of(&self.call_durations, &adapter.name);
        // One throwaway instance proves the component runs and tells us what it is.
        let mut probe = adapter.instantiate().await.map_err(|e| e.to_string())?;
        probe.store.set_epoch_deadline(self.limits.deadline_ticks());
        let failed = |e: wasmtime::Error, adapter: &Adapter, state: &GuestState| {
            // A guest that logged why before it trapped (a Lua script that does not load) says so.
            match state.last_error.clone() {
                Some(reason) => reason,
                None => adapter.sandbox_error(GuestCall::Describe, adapter.trap_cause(&e, state)).to_string(),
            }
        };
        adapter.metadata = match probe.world.adapter.call_describe(&mut probe.store).await {
            Ok(metadata) => metadata,
            Err(e) => return Err(failed(e, &adapter, probe.store.data())),
        };
        if let Some(native) = &probe.world.native {
            adapter.native = match native.call_protocols(&mut probe.store).await {
                Ok(protocols) => protocols.into_iter().take(8).collect(),
                Err(e) => return Err(failed(e, &adapter, probe.store.data())),
            };
        }
        Ok(adapter)
    }

    /// Checks `wasm` as a `name` adapter (compiles it, instantiates it, asks it to describe
    /// itself) without putting it in use.
    pub async fn check(&self, name: &AdapterName, origin: AdapterOrigin, wasm: &[u8]) -> Result<Arc<Adapter>, String> {
        self.check_reporting(name, origin, wasm, &mut LoadReport::default()).await
    }

    /// `check`, saying in `report` whether the compiled component came from the cache.
    pub async fn check_reporting(
        &self,
        name: &AdapterName,
        origin: AdapterOrigin,
        wasm: &[u8],
        report: &mut LoadReport,
    ) -> Result<Arc<Adapter>, String> {
        self.compile(name.clone(), origin, wasm, None, report).await.map(Arc::new)
    }

    /// Checks a Lua script as adapter `name`: it loads in the Lua-compat component and its
    /// table has what the contract needs. Not put in use.
    pub async fn check_lua(
        &self,
        name: &AdapterName,
        origin: AdapterOrigin,
        script: &str,
    ) -> Result<Arc<Adapter>, String> {
        self.compile(name.clone(), origin, lua::COMPONENT, Some(script.into()), &mut LoadReport::default())
            .await
            .map(Arc::new)
    }

    /// Puts an adapter in use, replacing the same-named one. Sessions already open keep the
    /// instance of the adapter they opened (a stream in flight ends on the old code).
    pub fn put(&self, adapter: Arc<Adapter>) {
        self.adapters.rcu(|current| {
            let mut next = HashMap::clone(current);
            next.insert(adapter.name.clone(), adapter.clone());
            next
        });
    }

    /// Takes an uploaded adapter out of use; a built-in it overrode comes back. False when
    /// there was no such file adapter.
    pub fn remove(&self, name: &AdapterName) -> bool {
        let mut removed = false;
        self.adapters.rcu(|current| {
            let mut next = HashMap::clone(current);
            removed = matches!(next.get(name).map(|a| a.origin()), Some(AdapterOrigin::File(_)));
            if removed {
                match self.builtins.get(name) {
                    Some(builtin) => next.insert(name.clone(), builtin.clone()),
                    None => next.remove(name),
                };
            }
            next
        });
        removed
    }

    /// Compiles (or loads from the cache) and links a component.
    fn prepare(&self, name: &str, wasm: &[u8], report: &mut LoadReport) -> Result<ExportsPre, String> {
        let (component, outcome) =
            self.cache.load(&self.engine, name, wasm).map_err(|e| format!("not a valid WebAssembly component: {e}"))?;
        match outcome {
            CacheOutcome::Hit => report.cache_hits += 1,
            CacheOutcome::Compiled => report.compiled += 1,
        }
        let instance_pre = self.linker.instantiate_pre(&component).map_err(|e| {
            format!("does not fit the switchyard:adapter world (or imports what the sandbox denies): {e}")
        })?;
        ExportsPre::new(instance_pre).map_err(|e| format!("does not export the switchyard:adapter world: {e}"))
    }

    pub fn adapter(&self, name: &AdapterName) -> Option<Arc<Adapter>> {
        self.adapters.load().get(name).cloned()
    }

    pub fn adapters(&self) -> Vec<Arc<Adapter>> {
        let mut all: Vec<Arc<Adapter>> = self.adapters.load().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    pub fn names(&self) -> Vec<String> {
        self.adapters().iter().map(|a| a.name.to_string()).collect()
    }

    /// Bounds each adapter's instance pool by the summed `max_concurrent` of its sources.
    pub fn size_pools(&self, config: &crate::config::Config) {
        for adapter in self.adapters() {
            adapter.set_pool_capacity(config.adapter_concurrency(adapter.name()));
        }
    }

    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }
}
