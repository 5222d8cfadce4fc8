//! Unified answers → Anthropic's wire format: a `message` object, or the SSE event sequence
//! message_start, content_block_start/delta/stop per block, message_delta, message_stop.

use serde_json::{Value, json};
use switchyard_unified::{Reply, ToolCall, UsageJson};

/// OpenAI `finish_reason` → Anthropic `stop_reason`.
fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

/// Unified usage → Anthropic usage: input tokens exclude cache reads and writes.
fn usage(unified: Option<&UsageJson>) -> Value {
    let details = unified.and_then(|u| u.prompt_tokens_details.as_ref());
    let cached = details.and_then(|d| d.cached_tokens);
    let created = details.and_then(|d| d.cache_creation_tokens);
    let prompt = unified.and_then(|u| u.prompt_tokens);
    let input = prompt.map(|p| p.saturating_sub(cached.unwrap_or(0).saturating_add(created.unwrap_or(0))));
    let output = unified.and_then(|u| u.completion_tokens);
    let mut out = json!({"input_tokens": input.unwrap_or(0), "output_tokens": output.unwrap_or(0)});
    if let Some(c) = cached {
        out["cache_read_input_tokens"] = json!(c);
    }
    if let Some(c) = created {
        out["cache_creation_input_tokens"] = json!(c);
    }
    out
}

fn message_id(unified_id: &str) -> String {
    if unified_id.starts_with("msg_") { unified_id.to_string() } else { format!("msg_{unified_id}") }
}

pub fn message(unified: &Reply) -> Value {
    let choice = unified.choices.first();
    let mut content = Vec::new();
    if let Some(message) = choice.and_then(|c| c.message.as_ref()) {
        if let Some(thinking) = message.reasoning().filter(|t| !t.is_empty()) {
            // The upstream's signature when it gave one (a later turn can send the block back).
            let signature = message.reasoning_signature.as_deref().unwrap_or_default();
            content.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
        }
        if let Some(text) = message.text().filter(|t| !t.is_empty()) {
            content.push(json!({"type": "text", "text": text}));
        }
        for call in &message.tool_calls {
            let arguments = call.function.arguments.as_deref().unwrap_or("{}");
            let input: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
            content.push(json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input}));
        }
    }
    json!({
        "id": message_id(unified.id.as_deref().unwrap_or_default()),
        "type": "message",
        "role": "assistant",
        "model": unified.model,
        "content": content,
        "stop_reason": choice.and_then(|c| c.finish_reason.as_ref()).and_then(Value::as_str).map(stop_reason),
        "stop_sequence": null,
        "usage": usage(unified.usage.as_ref()),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    Tool(u64),
}

/// Turns unified chunks into Anthropic SSE events, one call per chunk, then `finish`.
#[derive(Default)]
pub struct StreamEncoder {
    /// What `message_start` says of the input: the gateway's estimate (the upstream's count
    /// comes in `message_delta`, after the answer).
    input_estimate: u64,
    started: bool,
    open: Option<(Block, u64)>,
    next_index: u64,
    finish: Option<String>,
    usage: Option<UsageJson>,
}

pub fn sse(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

impl StreamEncoder {
    /// An encoder whose `message_start` reports `input_estimate` input tokens.
    pub fn estimating(input_estimate: u64) -> StreamEncoder {
        StreamEncoder { input_estimate, ..StreamEncoder::default() }
    }

    pub fn chunk(&mut self, chunk: Reply, out: &mut String) {
        if !self.started {
            self.started = true;
            let start = json!({"type": "message_start", "message": {
                "id": message_id(chunk.id.as_deref().unwrap_or_default()),
                "type": "message", "role": "assistant", "model": chunk.model, "content": [],
                "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": self.input_estimate, "output_tokens": 0},
            }});
            out.push_str(&sse("message_start", &start));
            out.push_str(&sse("ping", &json!({"type": "ping"})));
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let Some(choice) = chunk.choices.into_iter().next() else {
            return;
        };
        if let Some(finish) = choice.finish_reason.as_ref().and_then(Value::as_str) {
            self.finish = Some(finish.to_string());
        }
        let Some(delta) = choice.delta else {
            return;
        };
        if let Some(thinking) = delta.reasoning().filter(|t| !t.is_empty()) {
            let index = self.ensure(Block::Thinking, None, out);
            out.push_str(&sse("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": thinking}})));
        }
        if let Some(signature) = delta.reasoning_signature.as_deref().filter(|t| !t.is_empty()) {
            let index = self.ensure(Block::Thinking, None, out);
            out.push_str(&sse("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": signature}})));
        }
        if let Some(text) = delta.text().filter(|t| !t.is_empty()) {
            let index = self.ensure(Block::Text, None, out);
            out.push_str(&sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
            ));
        }
        for call in &delta.tool_calls {
            let tool = call.index.unwrap_or(0);
            let index = self.ensure(Block::Tool(tool), Some(call), out);
            if let Some(fragment) = call.function.arguments.as_deref().filter(|f| !f.is_empty()) {
                out.push_str(&sse("content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": fragment}})));
            }
        }
    }

    /// The closing events after a complete unified stream.
    pub fn finish(&mut self, out: &mut String) {
        self.close(out);
        let stop = self.finish.as_deref().map(stop_reason).unwrap_or("end_turn");
        out.push_str(&sse("message_delta", &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": usage(self.usage.as_ref())})));
        out.push_str(&sse("message_stop", &json!({"type": "message_stop"})));
    }

    /// The block index for `block`, opening it (and closing the previous one) when new.
    fn ensure(&mut self, block: Block, call: Option<&ToolCall>, out: &mut String) -> u64 {
        if let Some((open, index)) = self.open
            && open == block
        {
            return index;
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        let content_block = match (block, call) {
            (Block::Text, _) => json!({"type": "text", "text": ""}),
            (Block::Thinking, _) => json!({"type": "thinking", "thinking": ""}),
            (Block::Tool(_), call) => {
                let (id, name) = call.map_or((None, None), |c| (c.id.as_deref(), c.function.name.as_deref()));
                json!({"type": "tool_use", "id": id, "name": name, "input": {}})
            }
        };
        out.push_str(&sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": content_block}),
        ));
        self.open = Some((block, index));
        index
    }

    fn close(&mut self, out: &mut String) {
        if let Some((_, index)) = self.open.take() {
            out.push_str(&sse("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        }
    }
}

/// An error response in Anthropic's format.
pub fn error_response(error: crate::server::ApiError) -> axum::response::Response {
    use axum::response::IntoResponse;
    (error.status, axum::Json(error_body(error.status.as_u16(), &error.message))).into_response()
}

/// An error in Anthropic's shape, typed by status.
pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(chunks: &[Value]) -> Vec<(String, Value)> {
        let mut encoder = StreamEncoder::default();
        let mut out = String::new();
        for c in chunks {
            encoder.chunk(serde_json::from_value(c.clone()).unwrap(), &mut out);
        }
        encoder.finish(&mut out);
        out.split_terminator("\n\n")
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                (
                    name.trim_start_matches("event: ").to_string(),
                    serde_json::from_str(data.trim_start_matches("data: ")).unwrap(),
                )
            })
            .collect()
    }

    fn chunk(delta: Value, finish: Option<&str>) -> Value {
        json!({"id": "x", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    #[test]
    fn parallel_tool_calls_become_separate_tool_use_blocks_in_order() {
        let events = encode(&[
            chunk(json!({"role": "assistant", "content": "Let me check."}), None),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "weather", "arguments": ""}}]}),
                None,
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}), None),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}), None),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "time", "arguments": "{}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
            json!({"id": "x", "model": "m", "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 5}}}),
        ]);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(
            events[5].1["content_block"],
            json!({"type": "tool_use", "id": "call_a", "name": "weather", "input": {}})
        );
        assert_eq!(events[5].1["index"], 1);
        assert_eq!(events[7].1["delta"]["partial_json"], "\"Paris\"}");
        assert_eq!(events[9].1["index"], 2);
        assert_eq!(events[9].1["content_block"]["id"], "call_b");
        assert_eq!(events[12].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(
            events[12].1["usage"],
            json!({"input_tokens": 15, "output_tokens": 9, "cache_read_input_tokens": 5})
        );
    }

    #[test]
    fn thinking_then_text_are_two_blocks() {
        let events =
            encode(&[chunk(json!({"reasoning_content": "hmm"}), None), chunk(json!({"content": "ok"}), Some("stop"))]);
        assert_eq!(events[2].1["content_block"]["type"], "thinking");
        assert_eq!(events[3].1["delta"], json!({"type": "thinking_delta", "thinking": "hmm"}));
        assert_eq!(events[5].1["content_block"]["type"], "text");
        assert_eq!(events[8].1["delta"]["stop_reason"], "end_turn");
    }
}
