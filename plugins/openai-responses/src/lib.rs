//! Built-in `openai-responses` adapter: an upstream that speaks OpenAI's Responses API
//! (`POST /responses`). Responses clients are forwarded natively (the request as sent, the
//! answer and events as sent); chat-shaped (unified) requests are translated both ways.

mod native;
mod request;
mod stream;

use std::cell::RefCell;

use adapter_kit::errors::{adapter_error, upstream_error};
use adapter_kit::http::{join_url, setting_headers};
use adapter_kit::unified::{self, Usage};
use adapter_kit::{
    AdapterError, ErrorKind, Guest, GuestSession, HttpRequest, HttpResponse, Metadata, Operation, SourceContext,
    StreamEvent, StreamFraming, StreamOutput, host, setting,
};
use serde_json::{Value, json};

struct OpenAiResponses;

impl Guest for OpenAiResponses {
    type Session = Session;

    fn describe() -> Metadata {
        adapter_kit::metadata("openai-responses", "openai-responses", StreamFraming::Sse)
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
        if self.ctx.operation != Operation::Chat {
            return Err(adapter_error(ErrorKind::Unsupported, "the Responses API serves chat only"));
        }
        let unified = adapter_kit::parse_chat(&request)?;
        self.stream.borrow_mut().include_usage = unified.wants_stream_usage();
        let body = request::to_responses(&unified, &self.ctx.upstream_model)?;
        Ok(http(&self.ctx, body))
    }

    fn transform_response(&self, response: HttpResponse) -> Result<String, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        let body: Value = adapter_kit::parse_body(&response.body)?;
        unified_response(&body, &self.ctx.upstream_model)
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<StreamOutput, AdapterError> {
        self.stream.borrow_mut().event(&event, &self.ctx.upstream_model)
    }

    fn finish_stream(&self) -> Result<StreamOutput, AdapterError> {
        adapter_kit::stream_end(self.stream.borrow().done, "response.completed")
    }
}

/// `POST {base_url}/responses` (or the source's `path`) with the source's key.
fn http(ctx: &SourceContext, body: Value) -> HttpRequest {
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    if !ctx.api_key.is_empty() {
        headers.push(("authorization".into(), format!("Bearer {}", ctx.api_key)));
    }
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        headers.push(("accept".into(), "text/event-stream".into()));
    }
    headers.extend(setting_headers(&ctx.settings));
    HttpRequest {
        method: "POST".into(),
        url: join_url(&ctx.base_url, setting(ctx, "path").unwrap_or("/responses")),
        headers,
        body: serde_json::to_vec(&body).expect("JSON serialises"),
    }
}

/// A `response` object → the unified response: message text, reasoning summaries, function
/// calls, the finish reason from its status, usage with cached and reasoning tokens.
fn unified_response(response: &Value, model: &str) -> Result<String, AdapterError> {
    if response.get("status").and_then(Value::as_str) == Some("failed") {
        return Err(failure(&response["error"]));
    }
    let output = response
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| adapter_error(ErrorKind::InvalidResponse, "upstream response has no `output` array"))?;
    let (mut text, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
    for item in output {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    match part["type"].as_str() {
                        Some("output_text") => text.push_str(part["text"].as_str().unwrap_or_default()),
                        Some("refusal") => text.push_str(part["refusal"].as_str().unwrap_or_default()),
                        _ => {}
                    }
                }
            }
            Some("reasoning") => {
                for part in item["summary"].as_array().into_iter().flatten() {
                    reasoning.push_str(part["text"].as_str().unwrap_or_default());
                }
            }
            Some("function_call") => calls.push(json!({
                "id": item["call_id"], "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"].as_str().unwrap_or("{}")},
            })),
            _ => {} // built-in tool calls (web_search_call, ...): nothing a chat client can take
        }
    }
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) }});
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    let finish = finish_reason(response, !calls.is_empty());
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    Ok(unified::response(
        response["id"].as_str().unwrap_or_default(),
        response["model"].as_str().unwrap_or(model),
        response["created_at"].as_u64().unwrap_or_else(|| host::now_unix_ms() / 1000),
        message,
        Some(finish),
        response.get("usage").filter(|u| u.is_object()).map(usage_of),
    ))
}

/// The unified finish reason of a `response`: its status, and whether it called functions.
fn finish_reason(response: &Value, called: bool) -> &'static str {
    match (response["status"].as_str(), response["incomplete_details"]["reason"].as_str()) {
        (Some("incomplete"), Some("content_filter")) => "content_filter",
        (Some("incomplete"), _) => "length",
        _ if called => "tool_calls",
        _ => "stop",
    }
}

/// Responses usage → unified usage.
fn usage_of(usage: &Value) -> Usage {
    Usage {
        prompt: usage["input_tokens"].as_u64(),
        completion: usage["output_tokens"].as_u64(),
        cached: usage["input_tokens_details"]["cached_tokens"].as_u64(),
        cache_creation: None,
        reasoning: usage["output_tokens_details"]["reasoning_tokens"].as_u64(),
    }
}

/// A `response.error` (or a stream's `error` event) as a classified error.
fn failure(error: &Value) -> AdapterError {
    let code = error["code"].as_str();
    let message = error["message"].as_str().unwrap_or("the upstream response failed");
    let status = match code {
        Some("rate_limit_exceeded") => 429,
        Some("insufficient_quota") => 429,
        Some("server_error") | None => 500,
        Some("invalid_prompt" | "context_length_exceeded") => 400,
        Some(_) => 500,
    };
    let mut e = adapter_error(adapter_kit::errors::classify(status, code, message), message);
    e.status = Some(status);
    e.code = code.map(str::to_string);
    e
}

impl adapter_kit::NativeGuest for OpenAiResponses {
    type NativeSession = native::NativeSession;

    fn protocols() -> Vec<adapter_kit::NativeProtocol> {
        vec![adapter_kit::NativeProtocol {
            name: native::PROTOCOL.into(),
            headers: native::CLIENT_HEADERS.iter().map(|h| h.to_string()).collect(),
        }]
    }
}

adapter_kit::openai_models!(OpenAiResponses);
adapter_kit::export!(OpenAiResponses);
