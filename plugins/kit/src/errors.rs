//! Upstream error classification: HTTP status + error body → the `error-kind` the scheduler
//! acts on, with the upstream's own message kept for the client.

use crate::http::header;
use crate::{AdapterError, ErrorKind, HttpResponse};

pub fn adapter_error(kind: ErrorKind, message: &str) -> AdapterError {
    AdapterError { kind, message: message.to_string(), status: None, retry_after_ms: None, code: None }
}

/// Classifies a non-2xx upstream response.
pub fn upstream_error(response: &HttpResponse) -> AdapterError {
    let body = String::from_utf8_lossy(&response.body);
    let parsed: Option<serde_json::Value> = serde_json::from_str(&body).ok();
    let (message, code) = parsed.as_ref().map(error_fields).unwrap_or((None, None));
    let own_code = parsed.as_ref().and_then(|v| v.get("error")?.get("code")?.as_str()).map(|c| truncate(c, 64));
    let message = message.unwrap_or_else(|| {
        let trimmed = body.trim();
        if trimmed.is_empty() { format!("upstream returned HTTP {}", response.status) } else { truncate(trimmed, 512) }
    });
    AdapterError {
        kind: classify(response.status, code.as_deref(), &message),
        message,
        status: Some(response.status),
        retry_after_ms: header(&response.headers, "retry-after").and_then(parse_retry_after_ms),
        code: own_code,
    }
}

/// Pulls `message` and `type`/`code` out of the error bodies upstreams send:
/// `{"error":{"message","type","code"}}`, `{"error":"..."}`, `{"message": "..."}`.
pub fn error_fields(value: &serde_json::Value) -> (Option<String>, Option<String>) {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    match value.get("error") {
        Some(serde_json::Value::Object(e)) => {
            let code = e
                .get("code")
                .and_then(text)
                .or_else(|| e.get("type").and_then(text))
                .or_else(|| e.get("status").and_then(text));
            (e.get("message").and_then(text), code)
        }
        Some(serde_json::Value::String(s)) => (Some(s.clone()), None),
        _ => (value.get("message").and_then(text), value.get("type").and_then(text)),
    }
}

pub fn classify(status: u16, code: Option<&str>, message: &str) -> ErrorKind {
    let code = code.unwrap_or("").to_ascii_lowercase();
    let message = message.to_ascii_lowercase();
    let quota = code.contains("insufficient_quota")
        || code.contains("resource_exhausted") && message.contains("quota")
        || message.contains("exceeded your current quota")
        || code.contains("billing");
    if code.contains("content_filter")
        || code.contains("content_policy")
        || message.contains("content management policy")
    {
        return ErrorKind::ContentPolicy;
    }
    match status {
        401 => ErrorKind::Auth,
        402 => ErrorKind::Quota,
        403 => ErrorKind::Permission,
        404 => ErrorKind::NotFound,
        429 if quota => ErrorKind::Quota,
        429 => ErrorKind::RateLimit,
        400 | 409 | 413 | 422 => ErrorKind::BadRequest,
        // A redirect the host would not follow (to another origin): the source's base_url is wrong.
        300..=399 => ErrorKind::Server,
        503 | 529 => ErrorKind::Overloaded,
        s if s >= 500 => ErrorKind::Server,
        _ => ErrorKind::BadRequest,
    }
}

/// `Retry-After` as seconds (fractions allowed); HTTP dates are rare from LLM APIs and ignored.
pub fn parse_retry_after_ms(value: &str) -> Option<u64> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then_some((secs * 1000.0) as u64)
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, body: &str) -> HttpResponse {
        HttpResponse { status, headers: vec![("Retry-After".into(), "20".into())], body: body.as_bytes().to_vec() }
    }

    #[test]
    fn classifies_by_status_and_code() {
        assert_eq!(classify(429, Some("rate_limit_exceeded"), "slow down"), ErrorKind::RateLimit);
        assert_eq!(classify(429, Some("insufficient_quota"), "x"), ErrorKind::Quota);
        assert_eq!(classify(429, None, "You exceeded your current quota"), ErrorKind::Quota);
        assert_eq!(classify(401, None, ""), ErrorKind::Auth);
        assert_eq!(classify(402, None, ""), ErrorKind::Quota);
        assert_eq!(classify(529, Some("overloaded_error"), ""), ErrorKind::Overloaded);
        assert_eq!(classify(500, None, ""), ErrorKind::Server);
        assert_eq!(classify(400, Some("content_filter"), ""), ErrorKind::ContentPolicy);
        assert_eq!(classify(422, None, ""), ErrorKind::BadRequest);
        assert_eq!(classify(307, None, ""), ErrorKind::Server);
    }

    #[test]
    fn reads_the_error_bodies_upstreams_send() {
        let e = upstream_error(&response(
            429,
            r#"{"error":{"message":"slow","type":"requests","code":"rate_limit_exceeded"}}"#,
        ));
        assert_eq!(
            (e.kind, e.message.as_str(), e.status, e.retry_after_ms, e.code.as_deref()),
            (ErrorKind::RateLimit, "slow", Some(429), Some(20_000), Some("rate_limit_exceeded"))
        );
        let e = upstream_error(&response(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ));
        assert_eq!((e.kind, e.message.as_str(), e.code), (ErrorKind::Overloaded, "Overloaded", None));
        assert_eq!(upstream_error(&response(500, "")).message, "upstream returned HTTP 500");
        assert_eq!(upstream_error(&response(404, r#"{"error":"model not found"}"#)).message, "model not found");
        assert_eq!(parse_retry_after_ms("1.5"), Some(1500));
        assert_eq!(parse_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
