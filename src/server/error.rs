//! Errors in the OpenAI error format (`{"error":{"message","type","param","code"}}`),
//! each with the HTTP status a client library expects.

use std::borrow::Cow;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::provider::AttemptError;

pub use crate::domain::ErrorType;

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
    /// The client's view of a failed attempt, as the error's own disposition decides it.
    fn from(error: &AttemptError) -> Self {
        let d = error.disposition();
        let status = StatusCode::from_u16(d.status).unwrap_or(StatusCode::BAD_GATEWAY);
        ApiError {
            status,
            kind: d.error_type,
            code: d.code,
            param: None,
            message: error.client_message(),
            retry_after: d.retry_after,
        }
    }
}
