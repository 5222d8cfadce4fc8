//! One request's adapter session: a guest `session` resource on a shared instance, from the
//! first call to the last chunk; every call takes its turn on the instance under the CPU bound.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use wasmtime::Trap;
use wasmtime::component::ResourceAny;

use super::Adapter;
use super::bindings::{
    ClientRequest, GuestError, GuestState, HttpRequest, HttpResponse, NativeOutput, NativeResponse, SourceContext,
    StreamEvent, StreamOutput,
};
use super::error::{GuestCall, SandboxCause, SandboxError};
use super::pool::{Instance, Seat};

/// Outer error: the sandbox failed. Inner error: the adapter's own classified verdict.
pub type GuestResult<T> = Result<Result<T, GuestError>, SandboxError>;

pub struct AdapterSession {
    adapter: Arc<Adapter>,
    seat: Seat,
    /// The guest's session, once its constructor returned.
    resource: Option<ResourceAny>,
    /// A `native-session` (the client's protocol in and out), not a unified `session`.
    native: bool,
    /// What the guest's clock reads for this session (recorded test cases), else the time.
    fixed_now_ms: Option<u64>,
    /// Set once one of this session's own calls trapped or broke a limit.
    failed: bool,
    /// When the call running now started (its duration goes to the metrics).
    call_started: Option<std::time::Instant>,
}

/// The store, held for one guest call.
type Turn = OwnedMutexGuard<Instance>;

/// Runs one guest call on the session's turn: `$call` gets the store, the exports and the
/// session's resource, and its result is settled (timed, its trap named).
macro_rules! guest_call {
    ($self:ident, $call:expr, $input:expr, |$store:ident, $world:ident, $resource:ident| $body:expr) => {{
        let Some($resource) = $self.resource else {
            return Err($self.adapter.sandbox_error($call, SandboxCause::Trap("the session did not open".into())));
        };
        let (mut turn, wall) = $self.enter($call, $input).await?;
        let result = {
            let Instance { store: $store, world: $world } = &mut *turn;
            bounded(wall, $body).await
        };
        $self.settle($call, result, &turn)
    }};
}

impl AdapterSession {
    pub(super) fn new(adapter: Arc<Adapter>, seat: Seat, native: bool, fixed_now_ms: Option<u64>) -> Self {
        AdapterSession { adapter, seat, resource: None, native, fixed_now_ms, failed: false, call_started: None }
    }

    /// Runs the guest's session constructor: the session's first call, taking its turn on
    /// the shared instance like the others.
    pub(super) async fn open(&mut self, context: &SourceContext) -> Result<(), SandboxError> {
        let call = GuestCall::OpenSession;
        let (mut turn, wall) = self.enter(call, 0).await?;
        let result = {
            let Instance { store, world } = &mut *turn;
            match (self.native, &world.native) {
                (false, _) => bounded(wall, world.adapter.session().call_constructor(store, context)).await,
                (true, Some(native)) => bounded(wall, native.native_session().call_constructor(store, context)).await,
                (true, None) => {
                    let cause = SandboxCause::Trap("the component exports no `native` interface".into());
                    return Err(self.adapter.sandbox_error(call, cause));
                }
            }
        };
        self.resource = Some(self.settle(call, result, &turn)?);
        Ok(())
    }

    pub fn adapter(&self) -> &Adapter {
        &self.adapter
    }

    /// Linear memory its instance holds now (shared with the other sessions on it).
    pub fn memory_bytes(&self) -> usize {
        self.seat.instance.live.try_lock().map_or(0, |i| i.store.data().limiter.bytes())
    }

    pub async fn transform_request(&mut self, unified: &str) -> GuestResult<HttpRequest> {
        let call = GuestCall::TransformRequest;
        let out = guest_call!(self, call, unified.len(), |store, world, session| world
            .adapter
            .session()
            .call_transform_request(store, session, unified))?;
        self.retire_after_script_error(&out);
        if let Ok(request) = &out {
            self.check_output(call, request_bytes(request))?;
        }
        Ok(out)
    }

    pub async fn transform_response(&mut self, response: &HttpResponse) -> GuestResult<String> {
        let call = GuestCall::TransformResponse;
        let out = guest_call!(self, call, response.body.len(), |store, world, session| world
            .adapter
            .session()
            .call_transform_response(store, session, response))?;
        self.retire_after_script_error(&out);
        if let Ok(body) = &out {
            self.check_output(call, body.len())?;
        }
        Ok(out)
    }

    pub async fn transform_stream_chunk(&mut self, event: &StreamEvent) -> GuestResult<StreamOutput> {
        let call = GuestCall::TransformStreamChunk;
        let out = guest_call!(self, call, event.data.len(), |store, world, session| world
            .adapter
            .session()
            .call_transform_stream_chunk(store, session, event))?;
        self.retire_after_script_error(&out);
        self.check_stream_output(call, &out)?;
        Ok(out)
    }

    pub async fn finish_stream(&mut self) -> GuestResult<StreamOutput> {
        let call = GuestCall::FinishStream;
        let out = guest_call!(self, call, 0, |store, world, session| world
            .adapter
            .session()
            .call_finish_stream(store, session))?;
        self.retire_after_script_error(&out);
        self.check_stream_output(call, &out)?;
        Ok(out)
    }

    /// Whether this is a native session (the `native_*` calls), not a unified one.
    pub fn is_native(&self) -> bool {
        self.native
    }

    pub async fn native_transform_request(&mut self, request: &ClientRequest) -> GuestResult<HttpRequest> {
        let call = GuestCall::TransformRequest;
        let out = guest_call!(self, call, request.body.len(), |store, world, session| async {
            native(world)?.native_session().call_transform_request(store, session, request).await
        })?;
        if let Ok(request) = &out {
            self.check_output(call, request_bytes(request))?;
        }
        Ok(out)
    }

    pub async fn native_transform_response(&mut self, response: &HttpResponse) -> GuestResult<NativeResponse> {
        let call = GuestCall::TransformResponse;
        let out = guest_call!(self, call, response.body.len(), |store, world, session| async {
            native(world)?.native_session().call_transform_response(store, session, response).await
        })?;
        if let Ok(answer) = &out {
            self.check_output(call, answer.body.len() + answer.unified.len())?;
        }
        Ok(out)
    }

    pub async fn native_stream_chunk(&mut self, event: &StreamEvent) -> GuestResult<NativeOutput> {
        let call = GuestCall::TransformStreamChunk;
        let out = guest_call!(self, call, event.data.len(), |store, world, session| async {
            native(world)?.native_session().call_transform_stream_chunk(store, session, event).await
        })?;
        self.check_native_output(call, &out)?;
        Ok(out)
    }

    pub async fn native_finish_stream(&mut self) -> GuestResult<NativeOutput> {
        let call = GuestCall::FinishStream;
        let out = guest_call!(self, call, 0, |store, world, session| async {
            native(world)?.native_session().call_finish_stream(store, session).await
        })?;
        self.check_native_output(call, &out)?;
        Ok(out)
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

    /// Output over the cap fails this session; the instance that built it serves the
    /// sessions it has and takes no more (what it grew to is not reused).
    fn check_output(&mut self, call: GuestCall, bytes: usize) -> Result<(), SandboxError> {
        let limit = self.adapter.limits.max_output_bytes;
        if bytes > limit {
            self.failed = true;
            self.seat.instance.retire();
            return Err(self.adapter.sandbox_error(call, SandboxCause::OutputTooLarge { bytes, limit }));
        }
        Ok(())
    }

    /// Waits for the instance's turn (within the wall bound), drops what ended sessions left,
    /// arms the CPU deadline (scaled to the call's input) and hands out the store.
    async fn enter(&mut self, call: GuestCall, input_bytes: usize) -> Result<(Turn, Duration), SandboxError> {
        if self.failed {
            return Err(self.adapter.sandbox_error(call, SandboxCause::Trap("instance already failed".into())));
        }
        let limits = &self.adapter.limits;
        let wall = limits.wall_per_call;
        let instance = &self.seat.instance;
        let Ok(mut turn) = tokio::time::timeout(wall, instance.live.clone().lock_owned()).await else {
            return Err(self.adapter.sandbox_error(call, SandboxCause::InstanceBusy(wall)));
        };
        if instance.has_failed() {
            return Err(self.adapter.sandbox_error(call, SandboxCause::InstanceLost));
        }
        for stale in instance.take_stale() {
            turn.store.set_epoch_deadline(limits.deadline_ticks());
            let dropped = tokio::time::timeout(wall, stale.resource_drop_async(&mut turn.store)).await;
            if !matches!(dropped, Ok(Ok(()))) {
                instance.fail();
                return Err(self.adapter.sandbox_error(call, SandboxCause::InstanceLost));
            }
        }
        let state = turn.store.data_mut();
        state.fixed_now_ms = self.fixed_now_ms;
        state.waited_ticks = 0;
        turn.store.set_epoch_deadline(limits.deadline_ticks_for(input_bytes));
        self.call_started = Some(std::time::Instant::now());
        Ok((turn, wall))
    }

    /// A Lua script that failed may have left its state half-changed: its instance serves
    /// the sessions it has and takes no new one (the Lua-compat component marks a script's
    /// own errors with `LUA_SCRIPT_ERROR`).
    fn retire_after_script_error<T>(&mut self, out: &Result<T, super::GuestError>) {
        if self.adapter.is_lua() && out.as_ref().is_err_and(|e| e.message.starts_with(LUA_SCRIPT_ERROR)) {
            self.seat.instance.retire();
        }
    }

    /// A failed call fails the instance (its store is unusable; the other sessions on it are
    /// lost) and is named by cause; an instance grown past what a pooled one may keep retires.
    fn settle<R>(&mut self, call: GuestCall, result: Bounded<R>, turn: &Turn) -> Result<R, SandboxError> {
        if let Some(started) = self.call_started.take() {
            self.adapter.call_times.observe(call, started.elapsed());
        }
        let state = turn.store.data();
        if state.limiter.is_bloated() {
            self.seat.instance.retire();
        }
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                self.failed = true;
                self.seat.instance.fail();
                Err(self.adapter.sandbox_error(call, self.adapter.trap_cause(&e, state)))
            }
            // Abandoned mid-call: the store is in no state to be used again.
            Err(elapsed) => {
                self.failed = true;
                self.seat.instance.fail();
                Err(self.adapter.sandbox_error(call, SandboxCause::WallLimit(elapsed)))
            }
        }
    }
}

/// The `native` exports, or the trap a component without them earns.
fn native(world: &super::bindings::Exports) -> wasmtime::Result<&super::bindings::NativeGuest> {
    world.native.as_ref().ok_or_else(|| wasmtime::format_err!("the component exports no `native` interface"))
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
        // Dropped at the instance's next call; the seat then leaves the pool's count.
        if let Some(resource) = self.resource {
            self.seat.instance.leave_stale(resource);
        }
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
