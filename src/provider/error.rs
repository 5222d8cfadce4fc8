//! Why one attempt at one source failed, and the one place that says what each failure means:
//! [`AttemptError::disposition`] (what the client sees, what the scheduler does).

use std::time::Duration;

use std::borrow::Cow;

use crate::config::{AdapterName, SourceName};
use crate::domain::{Disposition, ErrorType, FailureKind, Verdict};
use crate::plugin::{GuestCall, SandboxError};

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
    Refused { adapter: AdapterName, kind: FailureKind, message: String },
    /// The adapter produced an HTTP request the host cannot send.
    #[error("adapter `{adapter}` built an unusable upstream request: {message}")]
    BadAdapterOutput { adapter: String, message: String },
    /// The upstream answered with an error, as classified by the adapter.
    #[error("source `{source_name}` answered {}: {message}", status.map(|s| s.to_string()).unwrap_or_else(|| "with an error".into()))]
    Upstream {
        source_name: SourceName,
        kind: FailureKind,
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
    /// A policy refused the answer (or failed, with `on_error: closed`) after it began.
    #[error("{message}")]
    Policy { status: u16, code: String, message: String },
}

impl AttemptError {
    /// What this failure means, decided here only: the client's status, error type, code and
    /// when to retry, and the scheduler's verdict on the slot.
    pub fn disposition(&self) -> Disposition {
        let verdict = self.verdict();
        let (status, error_type, code, retry_after): (u16, ErrorType, Option<Cow<'static, str>>, _) = match self {
            AttemptError::Refused { kind, .. } if kind.is_clients() => {
                let (status, error_type, code) = kind.client_view();
                (status, error_type, Some(code.into()), None)
            }
            AttemptError::Refused { .. } | AttemptError::Sandbox(_) | AttemptError::BadAdapterOutput { .. } => {
                (502, ErrorType::Adapter, None, None)
            }
            AttemptError::Transport { .. } => (502, ErrorType::Upstream, Some("upstream_unreachable".into()), None),
            AttemptError::Timeout { .. } => (504, ErrorType::Upstream, Some("upstream_timeout".into()), None),
            AttemptError::LocalResources { .. } => (503, ErrorType::Overloaded, Some("gateway_full".into()), None),
            AttemptError::Policy { status, code, .. } => {
                let error_type = match status {
                    403 => ErrorType::Permission,
                    500..=599 => ErrorType::Api,
                    _ => ErrorType::InvalidRequest,
                };
                (*status, error_type, Some(code.clone().into()), None)
            }
            AttemptError::Upstream { kind, status, code: upstream_code, retry_after, .. } => {
                let (fallback, error_type, code) = kind.client_view();
                // The upstream's own status and code (`context_length_exceeded`,
                // `content_filter`) when it gave them: clients act on them.
                let status = status.filter(|s| (400..600).contains(s)).unwrap_or(fallback);
                let code = upstream_code.clone().map_or(Cow::Borrowed(code), Cow::Owned);
                (status, error_type, Some(code), *retry_after)
            }
        };
        Disposition { status, error_type, code, retry_after, verdict }
    }

    /// The message the client reads: the upstream's own words for an upstream error, the
    /// whole account otherwise.
    pub fn client_message(&self) -> String {
        match self {
            AttemptError::Upstream { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }

    fn verdict(&self) -> Verdict {
        match self {
            e if e.is_gateways_own() => Verdict::GatewayFull,
            AttemptError::Refused { kind, .. } if kind.is_clients() => Verdict::Client,
            e if e.in_translation() => Verdict::OtherAdapter,
            AttemptError::Upstream { kind, retry_after, .. } => {
                kind.failure(*retry_after).map_or(Verdict::Client, Verdict::Cool)
            }
            AttemptError::Sandbox(_)
            | AttemptError::BadAdapterOutput { .. }
            | AttemptError::Transport { .. }
            | AttemptError::Timeout { .. } => Verdict::Cool(crate::domain::Failure::Transient),
            AttemptError::Refused { .. } | AttemptError::LocalResources { .. } | AttemptError::Policy { .. } => {
                Verdict::Client
            }
        }
    }

    /// The gateway's own capacity failed the attempt (an instance busy or lost, descriptors
    /// run out): like a full source, nothing cools and the next candidate is tried.
    fn is_gateways_own(&self) -> bool {
        match self {
            AttemptError::Sandbox(e) => e.cause.is_gateways_own(),
            AttemptError::LocalResources { .. } => true,
            _ => false,
        }
    }

    /// The failure came while the adapter translated the client's request, before anything
    /// was sent: the request's doing or the adapter's, never the source's.
    fn in_translation(&self) -> bool {
        match self {
            AttemptError::Refused { .. } => true,
            AttemptError::Sandbox(e) => e.call == GuestCall::TransformRequest,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::Failure;
    use crate::plugin::SandboxCause;

    fn upstream(kind: FailureKind, status: Option<u16>) -> AttemptError {
        AttemptError::Upstream {
            source_name: SourceName::new("anthropic"),
            kind,
            status,
            message: "Overloaded".into(),
            retry_after: None,
            code: None,
        }
    }

    fn sandbox(call: GuestCall, cause: SandboxCause) -> AttemptError {
        AttemptError::Sandbox(SandboxError { adapter: AdapterName::new("openai"), call, cause })
    }

    #[test]
    fn an_overloaded_upstream_cools_the_slot_and_the_client_sees_its_own_status() {
        let d = upstream(FailureKind::Overloaded, Some(529)).disposition();
        assert_eq!((d.status, d.error_type, d.code.as_deref()), (529, ErrorType::Overloaded, Some("overloaded")));
        assert_eq!(d.verdict, Verdict::Cool(Failure::Transient));
        assert!(d.sources_fault());
        // Without a status of its own, the kind's.
        assert_eq!(upstream(FailureKind::Overloaded, None).disposition().status, 503);
        // A status that is no error is not passed on.
        assert_eq!(upstream(FailureKind::Server, Some(200)).disposition().status, 502);
    }

    #[test]
    fn each_kind_of_failure_has_one_meaning() {
        let cases = [
            (upstream(FailureKind::BadRequest, Some(400)), 400, Verdict::Client),
            (upstream(FailureKind::NotFound, Some(404)), 404, Verdict::Client),
            (upstream(FailureKind::Auth, Some(401)), 401, Verdict::Cool(Failure::Auth)),
            (upstream(FailureKind::Quota, None), 429, Verdict::Cool(Failure::QuotaExhausted { window_ends_in: None })),
            (
                AttemptError::Refused {
                    adapter: AdapterName::new("openai"),
                    kind: FailureKind::Unsupported,
                    message: "no audio".into(),
                },
                400,
                Verdict::Client,
            ),
            (
                AttemptError::Refused {
                    adapter: AdapterName::new("openai"),
                    kind: FailureKind::Server,
                    message: "x".into(),
                },
                502,
                Verdict::OtherAdapter,
            ),
            (sandbox(GuestCall::TransformRequest, SandboxCause::Trap("oops".into())), 502, Verdict::OtherAdapter),
            (
                sandbox(GuestCall::TransformResponse, SandboxCause::Trap("oops".into())),
                502,
                Verdict::Cool(Failure::Transient),
            ),
            (sandbox(GuestCall::TransformRequest, SandboxCause::InstanceLost), 502, Verdict::GatewayFull),
            (
                AttemptError::LocalResources { source_name: SourceName::new("a"), message: "EMFILE".into() },
                503,
                Verdict::GatewayFull,
            ),
            (
                AttemptError::Timeout {
                    source_name: SourceName::new("a"),
                    phase: TimeoutPhase::FirstByte,
                    after: Duration::from_secs(1),
                },
                504,
                Verdict::Cool(Failure::Transient),
            ),
        ];
        for (error, status, verdict) in cases {
            let d = error.disposition();
            assert_eq!((d.status, d.verdict), (status, verdict), "{error}");
        }
    }

    #[test]
    fn a_rate_limit_carries_its_wait_to_the_slot_and_the_client() {
        let error = AttemptError::Upstream {
            source_name: SourceName::new("a"),
            kind: FailureKind::RateLimit,
            status: Some(429),
            message: "slow down".into(),
            retry_after: Some(Duration::from_secs(7)),
            code: Some("rate_limit_exceeded".into()),
        };
        let d = error.disposition();
        assert_eq!(d.verdict, Verdict::Cool(Failure::RateLimited { retry_after: Some(Duration::from_secs(7)) }));
        assert_eq!((d.retry_after, d.code.as_deref()), (Some(Duration::from_secs(7)), Some("rate_limit_exceeded")));
        assert_eq!(error.client_message(), "slow down");
    }
}
