//! Why one attempt at one source failed, classified so the client gets the right status and
//! the scheduler (later) knows whether to try elsewhere.

use std::time::Duration;

use crate::config::{AdapterName, SourceName};
use crate::plugin::{ErrorKind, SandboxError};

/// Which timeout fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// No first stream event within `first_byte_timeout_seconds`.
    FirstByte,
    /// A stream went silent for `idle_timeout_seconds`.
    Idle,
    /// A request took longer than `timeout_seconds` (a stream: `stream_timeout_seconds`) in all.
    Total,
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutPhase::FirstByte => "waiting for the first stream event",
            TimeoutPhase::Idle => "waiting for the next stream event",
            TimeoutPhase::Total => "for the whole request",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    /// The adapter trapped, hit a limit, or could not be checked out.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The adapter would not translate this request (its own verdict in transform-request).
    #[error("adapter `{adapter}` could not translate the request: {message}")]
    Refused { adapter: AdapterName, kind: ErrorKind, message: String },
    /// The adapter produced an HTTP request the host cannot send.
    #[error("adapter `{adapter}` built an unusable upstream request: {message}")]
    BadAdapterOutput { adapter: String, message: String },
    /// The upstream answered with an error, as classified by the adapter.
    #[error("source `{source_name}` answered {}: {message}", status.map(|s| s.to_string()).unwrap_or_else(|| "with an error".into()))]
    Upstream {
        source_name: SourceName,
        kind: ErrorKind,
        status: Option<u16>,
        message: String,
        retry_after: Option<Duration>,
        /// The upstream's own error code, passed on to the client.
        code: Option<String>,
    },
    /// Connecting, sending or reading failed.
    #[error("source `{source_name}` could not be reached: {message}")]
    Transport { source_name: SourceName, message: String },
    #[error("source `{source_name}` timed out {phase} (after {} ms)", after.as_millis())]
    Timeout { source_name: SourceName, phase: TimeoutPhase, after: Duration },
    /// The gateway's own descriptors, ports or memory ran out before the upstream was reached:
    /// the gateway is full, the source is not at fault.
    #[error(
        "the gateway could not open a connection to source `{source_name}`: {message} (the gateway's own limit: raise its open-file limit, `ulimit -n` or systemd's LimitNOFILE, or lower server.max_in_flight)"
    )]
    LocalResources { source_name: SourceName, message: String },
}

impl AttemptError {
    /// The gateway's own capacity failed the attempt (an instance busy or lost, descriptors
    /// run out): like a full source, nothing cools and the next candidate is tried.
    pub fn is_gateways_own(&self) -> bool {
        match self {
            AttemptError::Sandbox(e) => e.cause.is_gateways_own(),
            AttemptError::LocalResources { .. } => true,
            _ => false,
        }
    }

    /// The failure came while the adapter translated the client's request, before anything
    /// was sent: the request's doing or the adapter's, never the source's.
    pub fn in_translation(&self) -> bool {
        match self {
            AttemptError::Refused { .. } => true,
            AttemptError::Sandbox(e) => e.call == crate::plugin::GuestCall::TransformRequest,
            _ => false,
        }
    }
}
