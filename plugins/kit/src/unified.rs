//! The unified (OpenAI Chat Completions) shapes adapters produce, and readers for the unified
//! request, so every adapter builds chunks, responses and usage the same way.

use serde_json::{Map, Value, json};

/// Builds `chat.completion.chunk` JSON for one stream.
#[derive(Debug, Clone, Default)]
pub struct ChunkBuilder {
    pub id: String,
    pub model: String,
    pub created: u64,
}

impl ChunkBuilder {
    pub fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> String {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        })
        .to_string()
    }

    /// The final usage-only chunk, as OpenAI sends with `stream_options.include_usage`.
    pub fn usage_chunk(&self, usage: Value) -> String {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage,
        })
        .to_string()
    }
}

pub use switchyard_unified::{Usage, content_text};

/// A complete `chat.completion` response with one choice.
pub fn response(
    id: &str,
    model: &str,
    created: u64,
    message: Value,
    finish_reason: Option<&str>,
    usage: Option<Usage>,
) -> String {
    let mut body = json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
    });
    if let Some(usage) = usage {
        body["usage"] = usage.to_json();
    }
    body.to_string()
}

/// The texts of an embeddings request's `input` (a string or a list of strings).
pub fn embedding_inputs(request: &Map<String, Value>) -> Vec<String> {
    match request.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items.iter().filter_map(|s| s.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

/// An OpenAI embeddings list response.
pub fn embedding_list(model: &str, vectors: Vec<Value>, prompt_tokens: Option<u64>) -> String {
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    json!({"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}})
        .to_string()
}

/// `data:image/png;base64,AAAA` → (`image/png`, `AAAA`).
pub fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let media_type = meta.strip_suffix(";base64")?;
    Some((media_type, data))
}

/// Whether the client asked for the usage chunk (`stream_options.include_usage`).
pub fn wants_stream_usage(request: &Map<String, Value>) -> bool {
    request.get("stream_options").and_then(|o| o.get("include_usage")).and_then(Value::as_bool) == Some(true)
}

/// `max_tokens`, or its newer name `max_completion_tokens`.
pub fn max_tokens(request: &Map<String, Value>) -> Option<u64> {
    request.get("max_tokens").or_else(|| request.get("max_completion_tokens")).and_then(Value::as_u64)
}

/// `stop` as a list.
pub fn stop_sequences(request: &Map<String, Value>) -> Option<Vec<String>> {
    match request.get("stop")? {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => Some(items.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()),
        _ => None,
    }
}

/// The effort a request asks for: the client's `reasoning_effort`, else the gateway's
/// `reasoning_effort_hint` (what an Anthropic client's adaptive thinking asked for).
pub fn effort(request: &Map<String, Value>) -> Option<&str> {
    request.get("reasoning_effort").or_else(|| request.get("reasoning_effort_hint")).and_then(Value::as_str)
}

/// The thinking budget a request asks for: an explicit `thinking.budget_tokens` (Anthropic
/// style) or `reasoning_effort` (low/medium/high); `disable_thinking: true` wins over both.
pub fn thinking_budget(request: &Map<String, Value>) -> Option<u64> {
    if request.get("disable_thinking").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    if let Some(budget) = request.get("thinking").and_then(|t| t.get("budget_tokens")).and_then(Value::as_u64) {
        return Some(budget);
    }
    match effort(request)? {
        "minimal" => Some(1024),
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" => Some(24576),
        "xhigh" | "max" => Some(32768),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_split_into_media_type_and_data() {
        assert_eq!(parse_data_url("data:image/png;base64,AAAA"), Some(("image/png", "AAAA")));
        assert_eq!(parse_data_url("https://x/y.png"), None);
    }
}
