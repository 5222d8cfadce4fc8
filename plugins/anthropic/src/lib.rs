//! Built-in `anthropic` adapter: Anthropic's Messages API (`x-api-key`, `anthropic-version`).
//! Unified (OpenAI-shaped) requests become Messages requests; responses and SSE events come
//! back as unified responses and chunks, tool-call indexes and thinking included.

mod native;
mod request;
mod stream;

use std::cell::RefCell;

use adapter_kit::errors::{adapter_error, upstream_error};
use adapter_kit::unified::{self, Usage};
use adapter_kit::{
    AdapterError, ErrorKind, Guest, GuestSession, HttpRequest, HttpResponse, Metadata, Operation, SourceContext,
    StreamEvent, StreamFraming, StreamOutput, host,
};
use serde_json::{Value, json};

struct Anthropic;

impl Guest for Anthropic {
    type Session = Session;

    fn describe() -> Metadata {
        adapter_kit::metadata("anthropic", "anthropic-messages", StreamFraming::Sse)
    }
}

struct Session {
    ctx: SourceContext,
    stream: RefCell<stream::StreamState>,
}

impl GuestSession for Session {
    fn new(ctx: SourceContext) -> Self {
        Session { ctx, stream: RefCell::new(stream::StreamState::default()) }
    }

    fn transform_request(&self, request: String) -> Result<HttpRequest, AdapterError> {
        match self.ctx.operation {
            Operation::Embedding => {
                return Err(adapter_error(ErrorKind::Unsupported, "Anthropic has no embeddings API"));
            }
            Operation::Image => {
                return Err(adapter_error(ErrorKind::Unsupported, "Anthropic has no image generation API"));
            }
            Operation::Chat => {}
        }
        let unified = adapter_kit::parse_chat(&request)?;
        self.stream.borrow_mut().include_usage = unified.wants_stream_usage();
        let body = request::to_messages(&unified, &self.ctx.upstream_model)?;
        request::http(&self.ctx, body)
    }

    fn transform_response(&self, response: HttpResponse) -> Result<String, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        let message: Value = adapter_kit::parse_body(&response.body)?;
        unified_message(&message, &self.ctx.upstream_model)
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<StreamOutput, AdapterError> {
        self.stream.borrow_mut().event(&event, &self.ctx.upstream_model)
    }

    fn finish_stream(&self) -> Result<StreamOutput, AdapterError> {
        adapter_kit::stream_end(self.stream.borrow().done, "message_stop")
    }
}

/// A Messages API response → the unified response (text, thinking, tool calls, usage).
fn unified_message(message: &Value, model: &str) -> Result<String, AdapterError> {
    let blocks = message
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| adapter_error(ErrorKind::InvalidResponse, "upstream message has no `content` array"))?;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut signature = None;
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("thinking") => {
                reasoning.push_str(block.get("thinking").and_then(Value::as_str).unwrap_or_default());
                signature = block.get("signature").and_then(Value::as_str).filter(|s| !s.is_empty()).or(signature);
            }
            Some("tool_use") => tool_calls.push(json!({
                "id": block.get("id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": block.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into()),
                },
            })),
            _ => {}
        }
    }
    let mut out = json!({"role": "assistant", "content": if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { Value::String(text) }});
    if !reasoning.is_empty() {
        out["reasoning_content"] = Value::String(reasoning);
        if let Some(signature) = signature {
            out["reasoning_signature"] = json!(signature);
        }
    }
    if !tool_calls.is_empty() {
        out["tool_calls"] = Value::Array(tool_calls);
    }
    let finish = message.get("stop_reason").and_then(Value::as_str).map(finish_reason);
    let usage = message.get("usage").map(usage_of);
    Ok(unified::response(
        message.get("id").and_then(Value::as_str).unwrap_or_default(),
        message.get("model").and_then(Value::as_str).unwrap_or(model),
        host::now_unix_ms() / 1000,
        out,
        finish,
        usage,
    ))
}

/// Anthropic `stop_reason` → OpenAI `finish_reason`.
fn finish_reason(stop_reason: &str) -> &'static str {
    match stop_reason {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        _ => "stop",
    }
}

/// Anthropic usage → unified usage; prompt tokens include cache reads and writes.
fn usage_of(usage: &Value) -> Usage {
    let n = |k: &str| usage.get(k).and_then(Value::as_u64);
    let input = n("input_tokens");
    let read = n("cache_read_input_tokens");
    let created = n("cache_creation_input_tokens");
    Usage {
        prompt: input.map(|i| i.saturating_add(read.unwrap_or(0)).saturating_add(created.unwrap_or(0))),
        completion: n("output_tokens"),
        cached: read,
        cache_creation: created,
        reasoning: None,
    }
}

impl adapter_kit::NativeGuest for Anthropic {
    type NativeSession = native::NativeSession;

    fn protocols() -> Vec<adapter_kit::NativeProtocol> {
        let headers: Vec<String> = native::CLIENT_HEADERS.iter().map(|h| h.to_string()).collect();
        [native::PROTOCOL, native::COUNT_TOKENS]
            .into_iter()
            .map(|name| adapter_kit::NativeProtocol { name: name.into(), headers: headers.clone() })
            .collect()
    }
}

/// `GET {base_url}/models?limit=1000` (Anthropic's list, `{data: [{id}]}`).
impl adapter_kit::ModelsGuest for Anthropic {
    fn list_request(ctx: SourceContext) -> Result<HttpRequest, AdapterError> {
        let mut request = request::http(&ctx, json!({}))?;
        request.method = "GET".into();
        request.url = adapter_kit::http::join_url(&ctx.base_url, "/models?limit=1000");
        request.body = Vec::new();
        request.headers.retain(|(k, _)| k != "content-type");
        Ok(request)
    }

    fn read_list(_ctx: SourceContext, response: HttpResponse) -> Result<Vec<String>, AdapterError> {
        adapter_kit::model_ids(&response, "data", |m| m.get("id").and_then(Value::as_str).map(str::to_string))
    }
}

adapter_kit::export!(Anthropic);
