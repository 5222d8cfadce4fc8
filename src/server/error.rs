//! Errors in the OpenAI error format (`{"error":{"message","type","param","code"}}`),
//! each with the HTTP status a client library expects.

use std::borrow::Cow;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::plugin::ErrorKind;
use crate::provider::AttemptError;

/// The `type` of an error answer, as OpenAI's clients know them (plus the gateway's own
/// `adapter_error`, `upstream_error` and `model_not_allowed`); rendered in one place.
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

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: ErrorType,
    pub code: Option<Cow<'static, str>>,
    pub param: Option<String>,
    pub message: String,
    /// When the client may try again (an upstream's Retry-After), sent as `Retry-After`.
    pub retry_after: Option<std::time::Duration>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: ErrorType, message: impl Into<String>) -> Self {
        ApiError { status, kind, code: None, param: None, message: message.into(), retry_after: None }
    }

    pub fn code(mut self, code: impl Into<Cow<'static, str>>) -> Self {
        self.code = Some(code.into());
        self
    }

    pub fn param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn retry_after(mut self, wait: Option<std::time::Duration>) -> Self {
        self.retry_after = wait;
        self
    }

    /// The `Retry-After` header for this error, in whole seconds rounded up.
    pub fn retry_after_header(&self) -> Option<axum::http::HeaderValue> {
        let wait = self.retry_after?;
        let seconds = wait.as_millis().div_ceil(1000).max(1);
        axum::http::HeaderValue::from_str(&seconds.to_string()).ok()
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorType::InvalidRequest, message)
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind.as_str(), "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    /// OpenAI's error JSON, with the error itself in the response's extensions: a front
    /// door's envelope renders it in its own protocol instead.
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(value) = self.retry_after_header() {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, value);
        }
        response.extensions_mut().insert(self);
        response
    }
}

impl From<&AttemptError> for ApiError {
    fn from(error: &AttemptError) -> Self {
        let message = error.to_string();
        match error {
            AttemptError::Refused {
                kind: kind @ (ErrorKind::BadRequest | ErrorKind::Unsupported | ErrorKind::ContentPolicy),
                ..
            } => {
                let (status, kind_name, code) = upstream_kind(*kind);
                ApiError::new(status, kind_name, message).code(code)
            }
            AttemptError::Refused { .. } | AttemptError::Sandbox(_) | AttemptError::BadAdapterOutput { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, ErrorType::Adapter, message)
            }
            AttemptError::Transport { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, ErrorType::Upstream, message).code("upstream_unreachable")
            }
            AttemptError::Timeout { .. } => {
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, ErrorType::Upstream, message).code("upstream_timeout")
            }
            AttemptError::LocalResources { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorType::Overloaded, message).code("gateway_full")
            }
            AttemptError::Upstream { kind, status, message, code: upstream_code, retry_after, .. } => {
                let (fallback, kind_name, code) = upstream_kind(*kind);
                // The upstream's own code (`context_length_exceeded`, `content_filter`) when it
                // gave one: clients act on it.
                let code: Cow<'static, str> = upstream_code.clone().map_or(code.into(), Cow::Owned);
                let status = status
                    .and_then(|s| StatusCode::from_u16(s).ok())
                    .filter(|s| s.is_client_error() || s.is_server_error())
                    .unwrap_or(fallback);
                ApiError::new(status, kind_name, message.clone()).code(code).retry_after(*retry_after)
            }
        }
    }
}

/// (status when the upstream gave none, OpenAI error type, code) for each adapter verdict.
fn upstream_kind(kind: ErrorKind) -> (StatusCode, ErrorType, &'static str) {
    match kind {
        ErrorKind::BadRequest => (StatusCode::BAD_REQUEST, ErrorType::InvalidRequest, "bad_request"),
        ErrorKind::Auth => (StatusCode::UNAUTHORIZED, ErrorType::Authentication, "upstream_auth"),
        ErrorKind::Permission => (StatusCode::FORBIDDEN, ErrorType::Permission, "upstream_permission"),
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, ErrorType::NotFound, "upstream_not_found"),
        ErrorKind::RateLimit => (StatusCode::TOO_MANY_REQUESTS, ErrorType::RateLimit, "rate_limited"),
        ErrorKind::Quota => (StatusCode::TOO_MANY_REQUESTS, ErrorType::InsufficientQuota, "insufficient_quota"),
        ErrorKind::Overloaded => (StatusCode::SERVICE_UNAVAILABLE, ErrorType::Overloaded, "overloaded"),
        ErrorKind::Server => (StatusCode::BAD_GATEWAY, ErrorType::Upstream, "upstream_server_error"),
        ErrorKind::ContentPolicy => (StatusCode::BAD_REQUEST, ErrorType::InvalidRequest, "content_policy_violation"),
        ErrorKind::InvalidResponse => (StatusCode::BAD_GATEWAY, ErrorType::Upstream, "invalid_upstream_response"),
        ErrorKind::Truncated => (StatusCode::BAD_GATEWAY, ErrorType::Upstream, "stream_truncated"),
        ErrorKind::Unsupported => (StatusCode::BAD_REQUEST, ErrorType::InvalidRequest, "unsupported"),
    }
}
