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
    let google = parsed.as_ref().map(google_details).unwrap_or_default();
    let mut kind = classify(response.status, google.reason.as_deref().or(code.as_deref()), &message);
    // Google words every 429 as "exceeded your current quota"; a per-minute limit, or one it
    // says to retry after, is a rate limit that lifts in seconds, not a spent quota.
    if kind == ErrorKind::Quota
        && response.status == 429
        && !google.per_day
        && (google.per_minute || google.retry_delay_ms.is_some())
    {
        kind = ErrorKind::RateLimit;
    }
    AdapterError {
        kind,
        message,
        status: Some(response.status),
        retry_after_ms: header(&response.headers, "retry-after")
            .and_then(parse_retry_after_ms)
            .or(google.retry_delay_ms),
        code: own_code.or(google.reason),
    }
}

/// What Google's `error.details` say (Gemini, Vertex): the `ErrorInfo` reason, `RetryInfo`'s
/// delay, and which limits a `QuotaFailure` names.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GoogleDetails {
    pub reason: Option<String>,
    pub retry_delay_ms: Option<u64>,
    pub per_minute: bool,
    pub per_day: bool,
}

pub fn google_details(value: &serde_json::Value) -> GoogleDetails {
    let mut out = GoogleDetails::default();
    let details = value.get("error").and_then(|e| e.get("details")).and_then(|d| d.as_array());
    // Bounded: a hostile body may list anything; the first few details say what matters.
    for detail in details.into_iter().flatten().take(16) {
        match detail.get("@type").and_then(|t| t.as_str()).unwrap_or_default() {
            t if t.ends_with("google.rpc.ErrorInfo") => {
                out.reason = detail.get("reason").and_then(|r| r.as_str()).map(|r| truncate(r, 64));
            }
            t if t.ends_with("google.rpc.RetryInfo") => {
                out.retry_delay_ms = detail.get("retryDelay").and_then(|d| d.as_str()).and_then(parse_duration_ms);
            }
            t if t.ends_with("google.rpc.QuotaFailure") => {
                let violations = detail.get("violations").and_then(|v| v.as_array());
                for violation in violations.into_iter().flatten().take(16) {
                    let id = violation.get("quotaId").and_then(|q| q.as_str()).unwrap_or_default();
                    out.per_minute |= id.contains("PerMinute");
                    out.per_day |= id.contains("PerDay");
                }
            }
            _ => {}
        }
    }
    out
}

/// A protobuf JSON duration (`"26s"`, `"1.5s"`) in milliseconds.
fn parse_duration_ms(value: &str) -> Option<u64> {
    parse_retry_after_ms(value.strip_suffix('s')?)
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
    if code.contains("api_key_invalid") || message.contains("api key not valid") {
        return ErrorKind::Auth;
    }
    // Anthropic answers an account out of credit with a 400 invalid_request_error.
    if message.contains("credit balance is too low") {
        return ErrorKind::Quota;
    }
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
    fn reads_googles_error_details() {
        let no_header =
            |status: u16, body: &str| HttpResponse { status, headers: vec![], body: body.as_bytes().to_vec() };
        let per_minute = r#"{"error":{"code":429,"message":"You exceeded your current quota","status":"RESOURCE_EXHAUSTED",
            "details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"}]},
                       {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#;
        let e = upstream_error(&no_header(429, per_minute));
        assert_eq!((e.kind, e.retry_after_ms), (ErrorKind::RateLimit, Some(26_000)));
        let per_day = per_minute.replace("PerMinute", "PerDay");
        assert_eq!(upstream_error(&no_header(429, &per_day)).kind, ErrorKind::Quota, "a daily quota stays spent");
        let bare =
            r#"{"error":{"code":429,"message":"You exceeded your current quota","status":"RESOURCE_EXHAUSTED"}}"#;
        assert_eq!(upstream_error(&no_header(429, bare)).kind, ErrorKind::Quota);
        let bad_key = r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",
            "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}"#;
        let e = upstream_error(&no_header(400, bad_key));
        assert_eq!((e.kind, e.code.as_deref()), (ErrorKind::Auth, Some("API_KEY_INVALID")));
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
        let e = upstream_error(&response(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#,
        ));
        assert_eq!(e.kind, ErrorKind::Quota, "an account out of credit");
        assert_eq!(parse_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
