//! The unified (OpenAI Chat Completions) shapes adapters produce, and the typed unified request
//! they read, so every adapter builds chunks, responses and usage the same way.

use serde::Deserialize;
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

pub use switchyard_unified::{
    ChatMessage, ChatRequest, Content, EmbeddingsRequest, ImagesRequest, Part, Role, StreamOptions, ToolChoice,
    ToolDef, Usage, content_text,
};

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

/// Whether a request read as a map (by an adapter that passes it on) asks for the usage chunk.
pub fn wants_stream_usage(request: &Map<String, Value>) -> bool {
    request.get("stream_options").and_then(|o| StreamOptions::deserialize(o).ok()).and_then(|o| o.include_usage)
        == Some(true)
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
