//! One request's adapter session: holds a pooled instance and the guest `session` resource
//! from the first call to the last chunk; every call runs under the CPU deadline.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceAny;
use wasmtime::{Store, Trap};

use super::Adapter;
use super::bindings::{
    ClientRequest, Exports, GuestError, GuestState, HttpRequest, HttpResponse, NativeOutput, NativeResponse,
    StreamEvent, StreamOutput,
};
use super::error::{GuestCall, SandboxCause, SandboxError};
use super::pool::{Instance, PoolPermit};

/// Outer error: the sandbox failed. Inner error: the adapter's own classified verdict.
pub type GuestResult<T> = Result<Result<T, GuestError>, SandboxError>;

pub struct AdapterSession {
    adapter: Arc<Adapter>,
    instance: Option<Instance>,
    resource: ResourceAny,
    /// A `native-session` (the client's protocol in and out), not a unified `session`.
    native: bool,
    /// Set once a call trapped or broke a limit: the instance is never reused.
    poisoned: bool,
    _permit: PoolPermit,
    /// When the call running now started (its duration goes to the metrics).
    call_started: Option<std::time::Instant>,
}

impl AdapterSession {
    pub(super) fn new(
        adapter: Arc<Adapter>,
        instance: Instance,
        resource: ResourceAny,
        native: bool,
        permit: PoolPermit,
    ) -> Self {
        AdapterSession {
            adapter,
            instance: Some(instance),
            resource,
            native,
            poisoned: false,
            _permit: permit,
            call_started: None,
        }
    }

    pub fn adapter(&self) -> &Adapter {
        &self.adapter
    }

    /// Linear memory its instance holds now: what the instance keeps while pooled.
    pub fn memory_bytes(&self) -> usize {
        self.instance.as_ref().map_or(0, |i| i.store.data().limiter.bytes())
    }

    pub async fn transform_request(&mut self, unified: &str) -> GuestResult<HttpRequest> {
        let (store, world, session, wall) = self.enter(GuestCall::TransformRequest, unified.len())?;
        let result = bounded(wall, world.adapter.session().call_transform_request(store, session, unified)).await;
        let out = self.settle(GuestCall::TransformRequest, result)?;
        self.retire_after_script_error(&out);
        if let Ok(request) = &out {
            self.check_output(GuestCall::TransformRequest, request_bytes(request))?;
        }
        Ok(out)
    }

    pub async fn transform_response(&mut self, response: &HttpResponse) -> GuestResult<String> {
        let (store, world, session, wall) = self.enter(GuestCall::TransformResponse, response.body.len())?;
        let result = bounded(wall, world.adapter.session().call_transform_response(store, session, response)).await;
        let out = self.settle(GuestCall::TransformResponse, result)?;
        self.retire_after_script_error(&out);
        if let Ok(body) = &out {
            self.check_output(GuestCall::TransformResponse, body.len())?;
        }
        Ok(out)
    }

    pub async fn transform_stream_chunk(&mut self, event: &StreamEvent) -> GuestResult<StreamOutput> {
        let (store, world, session, wall) = self.enter(GuestCall::TransformStreamChunk, event.data.len())?;
        let result = bounded(wall, world.adapter.session().call_transform_stream_chunk(store, session, event)).await;
        let out = self.settle(GuestCall::TransformStreamChunk, result)?;
        self.retire_after_script_error(&out);
        self.check_stream_output(GuestCall::TransformStreamChunk, &out)?;
        Ok(out)
    }

    pub async fn finish_stream(&mut self) -> GuestResult<StreamOutput> {
        let (store, world, session, wall) = self.enter(GuestCall::FinishStream, 0)?;
        let result = bounded(wall, world.adapter.session().call_finish_stream(store, session)).await;
        let out = self.settle(GuestCall::FinishStream, result)?;
        self.retire_after_script_error(&out);
        self.check_stream_output(GuestCall::FinishStream, &out)?;
        Ok(out)
    }

    /// Whether this is a native session (the `native_*` calls), not a unified one.
    pub fn is_native(&self) -> bool {
        self.native
    }

    pub async fn native_transform_request(&mut self, request: &ClientRequest) -> GuestResult<HttpRequest> {
        let (store, world, session, wall) = self.enter_native(GuestCall::TransformRequest, request.body.len())?;
        let result = bounded(wall, world.native_session().call_transform_request(store, session, request)).await;
        let out = self.settle(GuestCall::TransformRequest, result)?;
        if let Ok(request) = &out {
            self.check_output(GuestCall::TransformRequest, request_bytes(request))?;
        }
        Ok(out)
    }

    pub async fn native_transform_response(&mut self, response: &HttpResponse) -> GuestResult<NativeResponse> {
        let (store, world, session, wall) = self.enter_native(GuestCall::TransformResponse, response.body.len())?;
        let result = bounded(wall, world.native_session().call_transform_response(store, session, response)).await;
        let out = self.settle(GuestCall::TransformResponse, result)?;
        if let Ok(answer) = &out {
            self.check_output(GuestCall::TransformResponse, answer.body.len() + answer.unified.len())?;
        }
        Ok(out)
    }

    pub async fn native_stream_chunk(&mut self, event: &StreamEvent) -> GuestResult<NativeOutput> {
        let (store, world, session, wall) = self.enter_native(GuestCall::TransformStreamChunk, event.data.len())?;
        let result = bounded(wall, world.native_session().call_transform_stream_chunk(store, session, event)).await;
        let out = self.settle(GuestCall::TransformStreamChunk, result)?;
        self.check_native_output(GuestCall::TransformStreamChunk, &out)?;
        Ok(out)
    }

    pub async fn native_finish_stream(&mut self) -> GuestResult<NativeOutput> {
        let (store, world, session, wall) = self.enter_native(GuestCall::FinishStream, 0)?;
        let result = bounded(wall, world.native_session().call_finish_stream(store, session)).await;
        let out = self.settle(GuestCall::FinishStream, result)?;
        self.check_native_output(GuestCall::FinishStream, &out)?;
        Ok(out)
    }

    /// `enter` for a native session: its component's `native` interface.
    #[allow(clippy::type_complexity)]
    fn enter_native(
        &mut self,
        call: GuestCall,
        input_bytes: usize,
    ) -> Result<(&mut Store<GuestState>, &super::bindings::NativeGuest, ResourceAny, Duration), SandboxError> {
        let adapter = self.adapter.clone();
        let (store, world, session, wall) = self.enter(call, input_bytes)?;
        match world.native.as_ref() {
            Some(native) => Ok((store, native, session, wall)),
            None => {
                Err(adapter
                    .sandbox_error(call, SandboxCause::Trap("the component exports no `native` interface".into())))
            }
        }
    }

    fn check_native_output(
        &mut self,
        call: GuestCall,
        out: &Result<NativeOutput, GuestError>,
    ) -> Result<(), SandboxError> {
        match out {
            Ok(o) => self.check_output(
                call,
                o.chunks.iter().map(String::len).sum::<usize>()
                    + o.events.iter().map(|e| e.event.len() + e.data.len()).sum::<usize>(),
            ),
            Err(_) => Ok(()),
        }
    }

    fn check_stream_output(
        &mut self,
        call: GuestCall,
        out: &Result<StreamOutput, GuestError>,
    ) -> Result<(), SandboxError> {
        match out {
            Ok(o) => self.check_output(call, o.chunks.iter().map(String::len).sum()),
            Err(_) => Ok(()),
        }
    }

    fn check_output(&mut self, call: GuestCall, bytes: usize) -> Result<(), SandboxError> {
        let limit = self.adapter.limits.max_output_bytes;
        if bytes > limit {
            self.poisoned = true;
            return Err(self.adapter.sandbox_error(call, SandboxCause::OutputTooLarge { bytes, limit }));
        }
        Ok(())
    }

    /// Arms the CPU deadline (scaled to the call's input) and hands out what a guest call
    /// needs, with its wall-clock bound.
    #[allow(clippy::type_complexity)]
    fn enter(
        &mut self,
        call: GuestCall,
        input_bytes: usize,
    ) -> Result<(&mut Store<GuestState>, &Exports, ResourceAny, Duration), SandboxError> {
        if self.poisoned {
            return Err(self.adapter.sandbox_error(call, SandboxCause::Trap("instance already failed".into())));
        }
        self.call_started = Some(std::time::Instant::now());
        let instance = self.instance.as_mut().expect("a session holds its instance until dropped");
        instance.store.set_epoch_deadline(self.adapter.limits.deadline_ticks_for(input_bytes));
        Ok((&mut instance.store, &instance.world, self.resource, self.adapter.limits.wall_per_call))
    }

    /// A Lua script that failed may have left its state half-changed: its instance is not
    /// reused (the Lua-compat component marks a script's own errors with `LUA_SCRIPT_ERROR`).
    fn retire_after_script_error<T>(&mut self, out: &Result<T, super::GuestError>) {
        if self.adapter.is_lua() && out.as_ref().is_err_and(|e| e.message.starts_with(LUA_SCRIPT_ERROR)) {
            self.poisoned = true;
        }
    }

    /// A failed call poisons the instance and is named by cause.
    fn settle<R>(&mut self, call: GuestCall, result: Bounded<R>) -> Result<R, SandboxError> {
        if let Some(started) = self.call_started.take() {
            self.adapter.call_times.observe(call, started.elapsed());
        }
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                self.poisoned = true;
                let state = self.instance.as_ref().expect("held until dropped").store.data();
                Err(self.adapter.sandbox_error(call, self.adapter.trap_cause(&e, state)))
            }
            // Abandoned mid-call: the store is in no state to be used again.
            Err(elapsed) => {
                self.poisoned = true;
                Err(self.adapter.sandbox_error(call, SandboxCause::WallLimit(elapsed)))
            }
        }
    }
}

/// What an upstream request the guest built weighs, for the output cap.
fn request_bytes(request: &HttpRequest) -> usize {
    request.body.len() + request.url.len() + request.headers.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
}

/// A guest call's result, or the wall-clock bound it ran past.
type Bounded<R> = Result<wasmtime::Result<R>, Duration>;

/// Runs a guest call under its wall-clock bound. The CPU bound (epoch deadline) gives back time
/// spent waiting in `fetch`; this one does not, so a guest that keeps fetching still ends.
async fn bounded<R>(wall: Duration, call: impl Future<Output = wasmtime::Result<R>>) -> Bounded<R> {
    tokio::time::timeout(wall, call).await.map_err(|_| wall)
}

/// How the Lua-compat component begins the message of an error the script itself caused.
pub const LUA_SCRIPT_ERROR: &str = "Lua adapter: ";

impl Drop for AdapterSession {
    fn drop(&mut self) {
        let Some(mut instance) = self.instance.take() else {
            return;
        };
        if self.poisoned || instance.store.data().limiter.is_bloated() {
            return;
        }
        instance.stale = Some(self.resource);
        self.adapter.pool.put_back(instance);
    }
}

/// Names a wasmtime error: our own limiter and the epoch deadline first, then the trap itself.
pub(super) fn trap_cause(error: &wasmtime::Error, state: &GuestState, limits: &super::SandboxLimits) -> SandboxCause {
    if state.limiter.hit {
        return SandboxCause::MemoryLimit(limits.memory_bytes);
    }
    if error.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() {
        return SandboxCause::SlotsExhausted(limits.pool_slots);
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => SandboxCause::CpuLimit(limits.cpu_per_call),
        Some(trap) => SandboxCause::Trap(trap.to_string()),
        None => SandboxCause::Trap(format!("{error:#}")),
    }
}
