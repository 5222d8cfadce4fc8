//! What can go wrong inside the sandbox, named precisely: which adapter, which guest call, why.
//! An adapter's own verdict on an upstream (its `adapter-error`) is not a sandbox error.

use std::fmt;
use std::time::Duration;

use crate::config::AdapterName;

/// The guest entry point that was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestCall {
    Instantiate,
    Describe,
    OpenSession,
    TransformRequest,
    TransformResponse,
    TransformStreamChunk,
    FinishStream,
    ListModels,
}

impl GuestCall {
    /// As metrics label it.
    pub fn name(self) -> &'static str {
        match self {
            GuestCall::Instantiate => "instantiate",
            GuestCall::Describe => "describe",
            GuestCall::OpenSession => "open_session",
            GuestCall::TransformRequest => "transform_request",
            GuestCall::TransformResponse => "transform_response",
            GuestCall::TransformStreamChunk => "transform_stream_chunk",
            GuestCall::FinishStream => "finish_stream",
            GuestCall::ListModels => "list_models",
        }
    }
}

impl fmt::Display for GuestCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GuestCall::Instantiate => "instantiate",
            GuestCall::Describe => "describe",
            GuestCall::OpenSession => "session constructor",
            GuestCall::TransformRequest => "transform-request",
            GuestCall::TransformResponse => "transform-response",
            GuestCall::TransformStreamChunk => "transform-stream-chunk",
            GuestCall::FinishStream => "finish-stream",
            GuestCall::ListModels => "models",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxCause {
    #[error("exceeded its CPU bound of {} ms per call", .0.as_millis())]
    CpuLimit(Duration),
    #[error("ran longer than its wall-clock bound of {} ms per call (sandbox.wall_ms_per_call)", .0.as_millis())]
    WallLimit(Duration),
    #[error("exceeded its memory cap of {} MiB", .0 >> 20)]
    MemoryLimit(usize),
    #[error("returned {bytes} bytes, over the {limit}-byte output cap")]
    OutputTooLarge { bytes: usize, limit: usize },
    #[error("trapped: {0}")]
    Trap(String),
    #[error("no instance became free within {} ms", .0.as_millis())]
    PoolExhausted(Duration),
    /// The engine's instance slots (`sandbox.pool_slots`) are all in use.
    #[error("all {0} instance slots of the engine are in use (sandbox.pool_slots)")]
    SlotsExhausted(u32),
    /// Other sessions' calls on the shared instance held it past the wall-clock bound.
    #[error("its instance stayed busy with other sessions' calls for {} ms", .0.as_millis())]
    InstanceBusy(Duration),
    /// Another session's call failed the instance this session shared; this one did nothing.
    #[error("the instance this session shared failed in another request's call")]
    InstanceLost,
}

impl SandboxCause {
    /// The gateway's own capacity ran out, or another request's failure took this one's
    /// instance: nothing is wrong with this request, its adapter call or the source.
    pub fn is_gateways_own(&self) -> bool {
        matches!(
            self,
            SandboxCause::PoolExhausted(_)
                | SandboxCause::SlotsExhausted(_)
                | SandboxCause::InstanceBusy(_)
                | SandboxCause::InstanceLost
        )
    }
}

#[derive(Debug, thiserror::Error)]
#[error("adapter `{adapter}` failed in {call}: {cause}")]
pub struct SandboxError {
    pub adapter: AdapterName,
    pub call: GuestCall,
    pub cause: SandboxCause,
}
