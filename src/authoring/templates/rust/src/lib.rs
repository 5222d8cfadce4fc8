//! The `{{name}}` adapter: an OpenAI-compatible pass-through to start from. It sends the
//! unified request with the upstream's model name and passes answers and chunks through.

wit_bindgen::generate!({ world: "adapter-world", path: "wit" });

use exports::switchyard::adapter::adapter::{Guest, GuestSession};
use serde_json::Value;
use switchyard::adapter::types::{
    AdapterError, ErrorKind, HttpRequest, HttpResponse, Metadata, SourceContext, StreamEvent, StreamFraming,
    StreamOutput,
};

struct Adapter;

impl Guest for Adapter {
    type Session = Session;

    fn describe() -> Metadata {
        Metadata {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            protocol: "openai-chat".into(),
            stream_framing: StreamFraming::Sse,
        }
    }
}

struct Session {
    ctx: SourceContext,
    /// Whether the upstream signalled the end of the stream.
    finished: std::cell::Cell<bool>,
}

impl GuestSession for Session {
    fn new(ctx: SourceContext) -> Self {
        Session { ctx, finished: std::cell::Cell::new(false) }
    }

    fn transform_request(&self, request: String) -> Result<HttpRequest, AdapterError> {
        let mut body: Value = serde_json::from_str(&request).map_err(|e| error(ErrorKind::BadRequest, &e.to_string()))?;
        body["model"] = Value::String(self.ctx.upstream_model.clone());
        Ok(HttpRequest {
            method: "POST".into(),
            url: format!("{}/chat/completions", self.ctx.base_url),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("authorization".into(), format!("Bearer {}", self.ctx.api_key)),
            ],
            body: body.to_string().into_bytes(),
        })
    }

    fn transform_response(&self, response: HttpResponse) -> Result<String, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        String::from_utf8(response.body).map_err(|_| error(ErrorKind::InvalidResponse, "the body is not UTF-8"))
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<StreamOutput, AdapterError> {
        if event.data.trim() == "[DONE]" {
            self.finished.set(true);
            return Ok(StreamOutput { chunks: vec![], done: true });
        }
        let chunk: Value =
            serde_json::from_str(&event.data).map_err(|e| error(ErrorKind::InvalidResponse, &e.to_string()))?;
        if chunk["choices"][0]["finish_reason"].is_string() {
            // Usage may still follow; the end of the body after this is a complete stream.
            self.finished.set(true);
        }
        Ok(StreamOutput { chunks: vec![event.data], done: false })
    }

    fn finish_stream(&self) -> Result<StreamOutput, AdapterError> {
        if self.finished.get() {
            Ok(StreamOutput { chunks: vec![], done: true })
        } else {
            Err(error(ErrorKind::Truncated, "the stream ended before the upstream finished its answer"))
        }
    }
}

fn error(kind: ErrorKind, message: &str) -> AdapterError {
    AdapterError { kind, message: message.into(), status: None, retry_after_ms: None, code: None }
}

/// Classifies an upstream error answer by its status, with its message and code when it has them.
fn upstream_error(response: &HttpResponse) -> AdapterError {
    let body: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    let message = body["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(&response.body).chars().take(500).collect());
    let kind = match response.status {
        400 | 422 => ErrorKind::BadRequest,
        401 => ErrorKind::Auth,
        402 => ErrorKind::Quota,
        403 => ErrorKind::Permission,
        404 => ErrorKind::NotFound,
        429 => ErrorKind::RateLimit,
        503 | 529 => ErrorKind::Overloaded,
        _ => ErrorKind::Server,
    };
    let retry_after_ms = response
        .headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, value)| value.trim().parse::<u64>().ok())
        .map(|seconds| seconds.saturating_mul(1000));
    AdapterError {
        kind,
        message,
        status: Some(response.status),
        retry_after_ms,
        code: body["error"]["code"].as_str().map(str::to_string),
    }
}

export!(Adapter);
