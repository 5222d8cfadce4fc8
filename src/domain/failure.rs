//! What a failed attempt means, in plain types: the kind of failure an adapter reports, what
//! it does to the slot (`Verdict`, `Failure`) and what the client sees (`Disposition`).

use std::borrow::Cow;
use std::time::Duration;

/// An adapter's verdict on an error, mirrored from the WIT `error-kind` so that the floors
/// below the plugin host (the scheduler, the books) never name a plugin type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    BadRequest,
    Auth,
    Permission,
    NotFound,
    RateLimit,
    Quota,
    Overloaded,
    Server,
    ContentPolicy,
    InvalidResponse,
    Truncated,
    Unsupported,
}

impl FailureKind {
    /// The request itself is at fault: no other source or adapter would take it either.
    pub const fn is_clients(self) -> bool {
        matches!(self, FailureKind::BadRequest | FailureKind::Unsupported | FailureKind::ContentPolicy)
    }

    /// What this kind does to the slot that answered it; `None` = the source is not at fault.
    pub const fn failure(self, retry_after: Option<Duration>) -> Option<Failure> {
        match self {
            FailureKind::BadRequest | FailureKind::NotFound | FailureKind::ContentPolicy | FailureKind::Unsupported => {
                None
            }
            FailureKind::Auth | FailureKind::Permission => Some(Failure::Auth),
            FailureKind::RateLimit => Some(Failure::RateLimited { retry_after }),
            FailureKind::Quota => Some(Failure::QuotaExhausted { window_ends_in: None }),
            FailureKind::Overloaded | FailureKind::Server | FailureKind::InvalidResponse | FailureKind::Truncated => {
                Some(Failure::Transient)
            }
        }
    }

    /// (status when the upstream gave none, error type, code) as the client sees this kind.
    pub const fn client_view(self) -> (u16, ErrorType, &'static str) {
        match self {
            FailureKind::BadRequest => (400, ErrorType::InvalidRequest, "bad_request"),
            FailureKind::Auth => (401, ErrorType::Authentication, "upstream_auth"),
            FailureKind::Permission => (403, ErrorType::Permission, "upstream_permission"),
            FailureKind::NotFound => (404, ErrorType::NotFound, "upstream_not_found"),
            FailureKind::RateLimit => (429, ErrorType::RateLimit, "rate_limited"),
            FailureKind::Quota => (429, ErrorType::InsufficientQuota, "insufficient_quota"),
            FailureKind::Overloaded => (503, ErrorType::Overloaded, "overloaded"),
            FailureKind::Server => (502, ErrorType::Upstream, "upstream_server_error"),
            FailureKind::ContentPolicy => (400, ErrorType::InvalidRequest, "content_policy_violation"),
            FailureKind::InvalidResponse => (502, ErrorType::Upstream, "invalid_upstream_response"),
            FailureKind::Truncated => (502, ErrorType::Upstream, "stream_truncated"),
            FailureKind::Unsupported => (400, ErrorType::InvalidRequest, "unsupported"),
        }
    }
}

/// Why an attempt failed, as far as cooling the slot is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Connect errors, resets, timeouts, 5xx, adapter failures: exponential backoff.
    Transient,
    /// 401 / 403: the credentials are wrong; retrying soon is pointless.
    Auth,
    /// 429: fixed rest, or the upstream's Retry-After when longer.
    RateLimited { retry_after: Option<Duration> },
    /// Quota or credit exhausted: rest until the quota window ends (capped); not a failure of
    /// the upstream, so the failure count stays.
    QuotaExhausted { window_ends_in: Option<Duration> },
}

/// What an attempt's failure means for the request and the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The request itself is wrong: it goes back to the client, nothing cools, nothing else is
    /// tried.
    Client,
    /// This adapter could not translate this request: other adapters may, nothing cools.
    OtherAdapter,
    /// The gateway's own capacity failed it (an instance busy or lost, descriptors run out):
    /// like a full source, nothing cools and the next candidate is tried.
    GatewayFull,
    /// The source failed: the slot cools and the next candidate is tried.
    Cool(Failure),
}

impl Verdict {
    /// The slot's failure when the source is at fault.
    pub const fn cooling(self) -> Option<Failure> {
        match self {
            Verdict::Cool(failure) => Some(failure),
            _ => None,
        }
    }
}

/// The `type` of an error answer, as OpenAI's clients know them (plus the gateway's own
/// `adapter_error`, `upstream_error` and `model_not_allowed`); each door renders it in its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    InvalidRequest,
    Authentication,
    Permission,
    NotFound,
    RateLimit,
    InsufficientQuota,
    Overloaded,
    Upstream,
    Adapter,
    Api,
    ModelNotAllowed,
}

impl ErrorType {
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorType::InvalidRequest => "invalid_request_error",
            ErrorType::Authentication => "authentication_error",
            ErrorType::Permission => "permission_error",
            ErrorType::NotFound => "not_found_error",
            ErrorType::RateLimit => "rate_limit_error",
            ErrorType::InsufficientQuota => "insufficient_quota",
            ErrorType::Overloaded => "overloaded_error",
            ErrorType::Upstream => "upstream_error",
            ErrorType::Adapter => "adapter_error",
            ErrorType::Api => "api_error",
            ErrorType::ModelNotAllowed => "model_not_allowed",
        }
    }
}

impl std::fmt::Display for ErrorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything a failed attempt decides, in one value: what the client sees (status, type,
/// code, when to retry) and what the scheduler does (the verdict).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disposition {
    pub status: u16,
    pub error_type: ErrorType,
    /// `None` where the type says it all (an adapter's failure).
    pub code: Option<Cow<'static, str>>,
    pub retry_after: Option<Duration>,
    pub verdict: Verdict,
}

impl Disposition {
    /// The source is to blame (its slot cools); otherwise the request, the adapter or the
    /// gateway is.
    pub const fn sources_fault(&self) -> bool {
        matches!(self.verdict, Verdict::Cool(_))
    }
}
