//! Recorded adapter cases (docs/adapter-cases.md): the file format, and a runner that plays
//! one through an adapter in the gateway's sandbox, the way the gateway would drive it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::matching::{Match, differences, short};
use crate::plugin::{Adapter, GuestError, HttpRequest, HttpResponse, Operation, SourceContext};

/// Largest case file or recorded body read: a case is a fixture, not a load test.
const MAX_CASE_BYTES: u64 = 64 << 20;

/// One recorded case.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    #[serde(default)]
    pub about: String,
    #[serde(default)]
    pub context: CaseContext,
    #[serde(default = "default_now")]
    pub now_unix_ms: u64,
    pub request: Value,
    pub upstream_request: Option<ExpectedRequest>,
    pub upstream_response: Option<UpstreamResponse>,
    pub expect: Option<Value>,
    pub expect_chunks: Option<Vec<Value>>,
    pub expect_error: Option<ExpectedError>,
}

fn default_now() -> u64 {
    1_700_000_000_000
}

/// The session's `source-context`, with defaults for what a case leaves out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaseContext {
    pub operation: CaseOperation,
    pub source_name: String,
    pub base_url: String,
    pub api_key: String,
    pub upstream_model: String,
    pub settings: BTreeMap<String, String>,
}

impl Default for CaseContext {
    fn default() -> Self {
        CaseContext {
            operation: CaseOperation::Chat,
            source_name: "test".into(),
            base_url: "https://api.example.com".into(),
            api_key: "test-key".into(),
            upstream_model: "model-x".into(),
            settings: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseOperation {
    #[default]
    Chat,
    Embedding,
    Image,
}

impl CaseContext {
    pub(super) fn source_context(&self) -> SourceContext {
        SourceContext {
            operation: match self.operation {
                CaseOperation::Chat => Operation::Chat,
                CaseOperation::Embedding => Operation::Embedding,
                CaseOperation::Image => Operation::Image,
            },
            source_name: self.source_name.clone(),
            base_url: self.base_url.trim_end_matches('/').to_string(),
            api_key: self.api_key.clone(),
            upstream_model: self.upstream_model.clone(),
            settings: self.settings.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }
}

/// What `transform-request` must build.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedRequest {
    pub method: Option<String>,
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub body: Option<Value>,
    pub body_text: Option<String>,
}

/// What the upstream answered.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamResponse {
    #[serde(default = "ok_status")]
    pub status: u16,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub body: Option<Value>,
    pub body_text: Option<String>,
    pub body_file: Option<PathBuf>,
}

fn ok_status() -> u16 {
    200
}

/// The `adapter-error` a case must end with.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedError {
    pub kind: String,
    pub status: Option<u16>,
    pub code: Option<String>,
    pub retry_after_ms: Option<u64>,
    pub message_contains: Option<String>,
}

/// A case file read and checked for sense, or why it cannot be used.
pub fn read_case(file: &Path) -> Result<Case, String> {
    let text = read_bounded(file)?;
    let case: Case = serde_json::from_slice(&text).map_err(|e| format!("not a valid case: {e}"))?;
    let streamed = case.request.get("stream").and_then(Value::as_bool) == Some(true);
    if streamed && case.expect.is_some() {
        return Err("`expect` is for non-streamed cases; a streamed case lists `expect_chunks`".into());
    }
    if !streamed && case.expect_chunks.is_some() {
        return Err("`expect_chunks` is for streamed cases (`\"stream\": true` in the request)".into());
    }
    if let Some(r) = &case.upstream_response {
        let bodies = [r.body.is_some(), r.body_text.is_some(), r.body_file.is_some()];
        if bodies.iter().filter(|b| **b).count() > 1 {
            return Err("`upstream_response` takes one of `body`, `body_text` and `body_file`".into());
        }
    } else if case.expect.is_some() || case.expect_chunks.is_some() {
        return Err("an expected answer needs the `upstream_response` it comes from".into());
    }
    if let Some(r) = &case.upstream_request
        && r.body.is_some()
        && r.body_text.is_some()
    {
        return Err("`upstream_request` takes `body` or `body_text`, not both".into());
    }
    Ok(case)
}

fn read_bounded(file: &Path) -> Result<Vec<u8>, String> {
    let size = std::fs::metadata(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?.len();
    if size > MAX_CASE_BYTES {
        return Err(format!("{} is larger than {} MiB", file.display(), MAX_CASE_BYTES >> 20));
    }
    std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))
}

/// What playing a case showed: each difference from what it expected (none: it passed).
#[derive(Debug, Default)]
pub struct Outcome {
    pub failures: Vec<String>,
    /// What happened, in a few words (`streamed, 5 chunks`).
    pub summary: String,
}

/// Plays `case` (read from a file in `dir`) through `adapter`.
pub async fn run(adapter: &Arc<Adapter>, case: &Case, dir: &Path) -> Outcome {
    let mut out = Outcome::default();
    let context = case.context.source_context();
    let mut session = match adapter.open_session_at(&context, Some(case.now_unix_ms), false).await {
        Ok(session) => session,
        Err(e) => return failed(format!("the session did not open: {e}")),
    };
    let unified = case.request.to_string();
    let request = match session.transform_request(&unified).await {
        Err(e) => return failed(e.to_string()),
        Ok(Err(error)) => {
            out.summary = "refused in transform-request".into();
            check_error(case, Some(&error), &mut out.failures);
            return out;
        }
        Ok(Ok(request)) => request,
    };
    if let Some(expected) = &case.upstream_request {
        check_request(expected, &request, &mut out.failures);
    }
    let Some(upstream) = &case.upstream_response else {
        out.summary = "request only".into();
        check_error(case, None, &mut out.failures);
        return out;
    };
    let body = match response_body(upstream, dir) {
        Ok(body) => body,
        Err(e) => return Outcome { failures: vec![e], summary: "the case is incomplete".into() },
    };
    let response = HttpResponse {
        status: upstream.status,
        headers: upstream.headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone())).collect(),
        body,
    };
    let streamed = case.request.get("stream").and_then(Value::as_bool) == Some(true);
    if streamed && (200..300).contains(&response.status) {
        let framing = adapter.metadata().stream_framing;
        let events = match crate::provider::split_events(&response.body, framing) {
            Ok(events) => events,
            Err(e) => return failed(format!("the recorded stream does not split into events: {e}")),
        };
        let mut chunks = Vec::new();
        let mut error = None;
        let mut done = false;
        for event in &events {
            match session.transform_stream_chunk(event).await {
                Err(e) => return failed(e.to_string()),
                Ok(Err(e)) => {
                    error = Some(e);
                    break;
                }
                Ok(Ok(output)) => {
                    chunks.extend(output.chunks);
                    if output.done {
                        done = true;
                        break;
                    }
                }
            }
        }
        if error.is_none() && !done {
            match session.finish_stream().await {
                Err(e) => return failed(e.to_string()),
                Ok(Err(e)) => error = Some(e),
                Ok(Ok(output)) => chunks.extend(output.chunks),
            }
        }
        out.summary = format!("streamed, {}, {}", count(events.len(), "event"), count(chunks.len(), "chunk"));
        check_chunks(case, &chunks, &mut out.failures);
        check_error(case, error.as_ref(), &mut out.failures);
    } else {
        match session.transform_response(&response).await {
            Err(e) => return failed(e.to_string()),
            Ok(Err(error)) => {
                out.summary = format!("upstream {}, adapter error", response.status);
                check_error(case, Some(&error), &mut out.failures);
            }
            Ok(Ok(unified)) => {
                out.summary = format!("upstream {}, answered", response.status);
                check_error(case, None, &mut out.failures);
                if let Some(expected) = &case.expect {
                    match serde_json::from_str::<Value>(&unified) {
                        Ok(actual) => {
                            prefixed("response", differences(expected, &actual, Match::Subset), &mut out.failures)
                        }
                        Err(e) => out.failures.push(format!("the unified response is not JSON ({e}): {unified:.200}")),
                    }
                }
            }
        }
    }
    out
}

fn failed(message: String) -> Outcome {
    Outcome { failures: vec![message], summary: "sandbox failure".into() }
}

pub(super) fn response_body(upstream: &UpstreamResponse, dir: &Path) -> Result<Vec<u8>, String> {
    Ok(match (&upstream.body, &upstream.body_text, &upstream.body_file) {
        (Some(json), _, _) => json.to_string().into_bytes(),
        (_, Some(text), _) => text.clone().into_bytes(),
        (_, _, Some(file)) => read_bounded(&dir.join(file))?,
        _ => Vec::new(),
    })
}

fn check_request(expected: &ExpectedRequest, actual: &HttpRequest, failures: &mut Vec<String>) {
    if let Some(method) = &expected.method
        && !method.eq_ignore_ascii_case(&actual.method)
    {
        failures.push(format!("upstream method: expected {method}, got {}", actual.method));
    }
    if let Some(url) = &expected.url
        && url != &actual.url
    {
        failures.push(format!("upstream url: expected {url}, got {}", actual.url));
    }
    for (name, value) in &expected.headers {
        let got: Vec<&str> =
            actual.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect();
        if !got.contains(&value.as_str()) {
            let got = if got.is_empty() { "none".to_string() } else { got.join(", ") };
            failures.push(format!("upstream header {name}: expected {value:?}, got {got}"));
        }
    }
    if let Some(text) = &expected.body_text {
        let body = String::from_utf8_lossy(&actual.body);
        if body != *text {
            failures.push(format!("upstream body: expected {text:.200?}, got {body:.200?}"));
        }
    }
    if let Some(body) = &expected.body {
        match serde_json::from_slice::<Value>(&actual.body) {
            Ok(actual) => prefixed("upstream body", differences(body, &actual, Match::Exact), failures),
            Err(e) => failures
                .push(format!("upstream body is not JSON ({e}): {:.200}", String::from_utf8_lossy(&actual.body))),
        }
    }
}

fn check_chunks(case: &Case, chunks: &[String], failures: &mut Vec<String>) {
    let Some(expected) = &case.expect_chunks else {
        return;
    };
    let mut parsed = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        match serde_json::from_str::<Value>(chunk) {
            Ok(value) => parsed.push(value),
            Err(e) => {
                failures.push(format!("chunk {i} is not JSON ({e}): {chunk:.200}"));
                return;
            }
        }
    }
    if parsed.len() != expected.len() {
        failures.push(format!("expected {} chunks, got {}:", expected.len(), parsed.len()));
        for (i, chunk) in parsed.iter().enumerate() {
            failures.push(format!("  chunk {i}: {}", short(chunk)));
        }
    }
    for (i, (want, got)) in expected.iter().zip(&parsed).enumerate() {
        prefixed(&format!("chunk {i}"), differences(want, got, Match::Subset), failures);
    }
}

fn check_error(case: &Case, actual: Option<&GuestError>, failures: &mut Vec<String>) {
    match (&case.expect_error, actual) {
        (None, None) => {}
        (None, Some(error)) => failures.push(format!("unexpected adapter error: {}", describe(error))),
        (Some(want), None) => failures.push(format!("expected an adapter error of kind {}, got none", want.kind)),
        (Some(want), Some(error)) => {
            let mut wrong = Vec::new();
            if want.kind != error.kind.wit_name() {
                wrong.push(format!("kind {} (expected {})", error.kind.wit_name(), want.kind));
            }
            if let Some(status) = want.status.filter(|s| Some(*s) != error.status) {
                wrong.push(format!("status {} (expected {status})", shown(error.status)));
            }
            if let Some(code) = want.code.as_ref().filter(|c| Some(*c) != error.code.as_ref()) {
                wrong.push(format!("code {} (expected {code})", shown(error.code.as_ref())));
            }
            if let Some(ms) = want.retry_after_ms.filter(|ms| Some(*ms) != error.retry_after_ms) {
                wrong.push(format!("retry_after_ms {} (expected {ms})", shown(error.retry_after_ms)));
            }
            if let Some(part) = &want.message_contains
                && !error.message.contains(part.as_str())
            {
                wrong.push(format!("message does not contain {part:?}"));
            }
            if !wrong.is_empty() {
                failures.push(format!("adapter error: {}", wrong.join("; ")));
                failures.push(format!("  the adapter said: {}", describe(error)));
            }
        }
    }
}

fn shown<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "none".to_string(), |v| v.to_string())
}

fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

fn describe(error: &GuestError) -> String {
    let status = error.status.map(|s| format!(" (status {s})")).unwrap_or_default();
    // Whole (up to 2,000 characters): an exception's message and where it came from.
    format!("{}{status}: {:.2000}", error.kind.wit_name(), error.message)
}

fn prefixed(what: &str, differences: Vec<String>, failures: &mut Vec<String>) {
    failures.extend(differences.into_iter().map(|d| format!("{what} {d}")));
}

/// The case files of a folder, in name order.
pub fn case_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    if files.is_empty() {
        return Err(format!("{} has no *.json case files", dir.display()));
    }
    Ok(files)
}
