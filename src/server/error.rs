//! Errors in the OpenAI error format (`{"error":{"message","type","param","code"}}`),
//! each with the HTTP status a client library expects.

use std::borrow::Cow;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::plugin::ErrorKind;
use crate::provider::AttemptError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub code: Option<Cow<'static, str>>,
    pub param: Option<String>,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, kind, code: None, param: None, message: message.into() }
    }

    pub fn code(mut self, code: impl Into<Cow<'static, str>>) -> Self {
        self.code = Some(code.into());
        self
    }

    pub fn param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
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
                ApiError::new(StatusCode::BAD_GATEWAY, "adapter_error", message)
            }
            AttemptError::Transport { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", message).code("upstream_unreachable")
            }
            AttemptError::Timeout { .. } => {
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, "upstream_error", message).code("upstream_timeout")
            }
            AttemptError::Upstream { kind, status, message, code: upstream_code, .. } => {
                let (fallback, kind_name, code) = upstream_kind(*kind);
                // The upstream's own code (`context_length_exceeded`, `content_filter`) when it
                // gave one: clients act on it.
                let code: Cow<'static, str> = upstream_code.clone().map_or(code.into(), Cow::Owned);
                let status = status
                    .and_then(|s| StatusCode::from_u16(s).ok())
                    .filter(|s| s.is_client_error() || s.is_server_error())
                    .unwrap_or(fallback);
                ApiError::new(status, kind_name, message.clone()).code(code)
            }
        }
    }
}

/// (status when the upstream gave none, OpenAI error type, code) for each adapter verdict.
fn upstream_kind(kind: ErrorKind) -> (StatusCode, &'static str, &'static str) {
    match kind {
        ErrorKind::BadRequest => (StatusCode::BAD_REQUEST, "invalid_request_error", "bad_request"),
        ErrorKind::Auth => (StatusCode::UNAUTHORIZED, "authentication_error", "upstream_auth"),
        ErrorKind::Permission => (StatusCode::FORBIDDEN, "permission_error", "upstream_permission"),
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found_error", "upstream_not_found"),
        ErrorKind::RateLimit => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", "rate_limited"),
        ErrorKind::Quota => (StatusCode::TOO_MANY_REQUESTS, "insufficient_quota", "insufficient_quota"),
        ErrorKind::Overloaded => (StatusCode::SERVICE_UNAVAILABLE, "overloaded_error", "overloaded"),
        ErrorKind::Server => (StatusCode::BAD_GATEWAY, "upstream_error", "upstream_server_error"),
        ErrorKind::ContentPolicy => (StatusCode::BAD_REQUEST, "invalid_request_error", "content_policy_violation"),
        ErrorKind::InvalidResponse => (StatusCode::BAD_GATEWAY, "upstream_error", "invalid_upstream_response"),
        ErrorKind::Truncated => (StatusCode::BAD_GATEWAY, "upstream_error", "stream_truncated"),
        ErrorKind::Unsupported => (StatusCode::BAD_REQUEST, "invalid_request_error", "unsupported"),
    }
}
