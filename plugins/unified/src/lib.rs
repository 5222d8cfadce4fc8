//! The unified form (OpenAI Chat Completions shapes) as types, written once for the gateway and
//! its adapters: the request as adapters read it, usage as adapters report it and the books read
//! it, and the parts of a response or chunk the gateway reads back. Readers are lenient where the shape allows (an adapter's
//! output is not trusted): what they cannot read is `None`, never a panic.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod read;
mod request;

use read::{count, list, text};
pub use request::{
    ChatMessage, ChatRequest, Content, EmbeddingsRequest, FunctionDef, ImagesRequest, JsonSchemaFormat, Part,
    ResponseFormat, Role, StreamOptions, ToolChoice, ToolDef,
};

/// Token counts as the upstream reported them; `None` means "not reported", never 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// All prompt tokens, cached ones included.
    pub prompt: Option<u64>,
    pub completion: Option<u64>,
    /// Prompt tokens read from the upstream's cache.
    pub cached: Option<u64>,
    /// Prompt tokens written to the upstream's cache (Anthropic).
    pub cache_creation: Option<u64>,
    pub reasoning: Option<u64>,
}

impl Usage {
    /// The `usage` object of a response or a usage chunk.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(UsageJson::from(*self)).unwrap_or(Value::Null)
    }
}

/// `usage` on the wire: what adapters write and the gateway's books read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageJson {
    #[serde(default, deserialize_with = "count")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    pub completion_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptDetails {
    #[serde(default, deserialize_with = "count")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "count")]
    pub cache_creation_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionDetails {
    #[serde(default, deserialize_with = "count")]
    pub reasoning_tokens: Option<u64>,
}

impl From<Usage> for UsageJson {
    fn from(u: Usage) -> UsageJson {
        UsageJson {
            prompt_tokens: u.prompt,
            completion_tokens: u.completion,
            total_tokens: u.prompt.zip(u.completion).map(|(p, c)| p.saturating_add(c)),
            prompt_tokens_details: (u.cached.is_some() || u.cache_creation.is_some())
                .then_some(PromptDetails { cached_tokens: u.cached, cache_creation_tokens: u.cache_creation }),
            completion_tokens_details: u.reasoning.map(|r| CompletionDetails { reasoning_tokens: Some(r) }),
        }
    }
}

/// The parts of a `chat.completion` response or `chat.completion.chunk` the gateway reads; the
/// rest is skipped unread.
#[derive(Debug, Default, Deserialize)]
pub struct Reply {
    #[serde(default, deserialize_with = "text")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pub model: Option<String>,
    #[serde(default, deserialize_with = "list")]
    pub choices: Vec<Choice>,
    pub usage: Option<UsageJson>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Choice {
    /// A whole response's.
    pub message: Option<Message>,
    /// A chunk's.
    pub delta: Option<Message>,
    pub finish_reason: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Message {
    /// A string in every unified answer (text parts accepted); anything else reads as no text.
    pub content: Option<Value>,
    pub reasoning_content: Option<Value>,
    /// The upstream's signature of the reasoning (Anthropic), so a later turn can send it back.
    #[serde(default, deserialize_with = "text")]
    pub reasoning_signature: Option<String>,
    #[serde(default, deserialize_with = "list")]
    pub tool_calls: Vec<ToolCall>,
}

impl Message {
    /// `content` when it is a string (every unified answer's), else `None`.
    pub fn text(&self) -> Option<&str> {
        self.content.as_ref().and_then(Value::as_str)
    }

    /// `reasoning_content` when it is a string.
    pub fn reasoning(&self) -> Option<&str> {
        self.reasoning_content.as_ref().and_then(Value::as_str)
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct ToolCall {
    #[serde(default, deserialize_with = "count")]
    pub index: Option<u64>,
    #[serde(default, deserialize_with = "text")]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Function,
}

#[derive(Debug, Default, Deserialize)]
pub struct Function {
    #[serde(default, deserialize_with = "text")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pub arguments: Option<String>,
}

impl Reply {
    /// A unified response or chunk; `None` when it is not one.
    pub fn parse(json: &str) -> Option<Reply> {
        serde_json::from_str(json).ok()
    }

    /// The text of a whole response's first answer ("" when it has none).
    pub fn text(&self) -> String {
        self.choices
            .first()
            .and_then(|c| c.message.as_ref())
            .and_then(|m| m.content.as_ref())
            .map_or_else(String::new, content_text)
    }
}

/// The text of a unified `content`: a string, or the `text` parts joined.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("")
        }
        _ => String::new(),
    }
}

/// An Anthropic image block's `source`: `base64` (with `media_type` and `data`) or `url`;
/// other kinds (a `file` id) have no URL the unified form can carry.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AnthropicImageSource {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub media_type: Option<String>,
    pub data: Option<String>,
    pub url: Option<String>,
}

impl AnthropicImageSource {
    /// As the URL the unified (OpenAI) form carries: a data URL for `base64`, the URL itself
    /// for `url`; `None` for any other source.
    pub fn url(&self) -> Option<String> {
        match self.kind.as_deref() {
            Some("base64") => Some(format!(
                "data:{};base64,{}",
                self.media_type.as_deref().unwrap_or("image/png"),
                self.data.as_deref().unwrap_or_default()
            )),
            Some("url") => Some(self.url.clone().unwrap_or_default()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_keeps_not_reported_apart_from_zero() {
        let u = Usage { prompt: Some(10), completion: None, ..Default::default() };
        assert_eq!(u.to_json(), json!({"prompt_tokens": 10, "completion_tokens": null, "total_tokens": null}));
        let u = Usage { prompt: Some(10), completion: Some(0), cached: Some(0), ..Default::default() };
        assert_eq!(u.to_json()["total_tokens"], 10);
        assert_eq!(u.to_json()["prompt_tokens_details"], json!({"cached_tokens": 0}));
        let u = Usage { cache_creation: Some(5), reasoning: Some(7), ..Default::default() };
        assert_eq!(u.to_json()["prompt_tokens_details"], json!({"cached_tokens": null, "cache_creation_tokens": 5}));
        assert_eq!(u.to_json()["completion_tokens_details"], json!({"reasoning_tokens": 7}));
    }

    #[test]
    fn what_an_adapter_writes_the_books_read_back() {
        let u = Usage { prompt: Some(9), completion: Some(12), cached: Some(3), ..Default::default() };
        let read: UsageJson = serde_json::from_value(u.to_json()).unwrap();
        assert_eq!((read.prompt_tokens, read.total_tokens), (Some(9), Some(21)));
        assert_eq!(read.prompt_tokens_details.and_then(|d| d.cached_tokens), Some(3));
    }

    #[test]
    fn a_replys_text_is_read_from_strings_and_parts_and_never_panics() {
        let reply = Reply::parse(r#"{"choices":[{"message":{"content":"Hi"}}]}"#).unwrap();
        assert_eq!(reply.text(), "Hi");
        let parts = Reply::parse(r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"text":"b"}]}}]}"#);
        assert_eq!(parts.unwrap().text(), "ab");
        for odd in [r#"{}"#, r#"{"choices":[]}"#, r#"{"choices":[{"message":{"content":7}}]}"#, r#"{"choices":[{}]}"#] {
            assert_eq!(Reply::parse(odd).unwrap().text(), "", "{odd}");
        }
        assert!(Reply::parse("not json").is_none());
    }

    #[test]
    fn odd_counts_and_lists_read_as_absent_and_the_rest_of_the_reply_still_reads() {
        let reply = Reply::parse(
            r#"{"choices":[{"delta":{"content":"a","tool_calls":[{"index":-1,"id":3,"function":{"name":"f"}}]}}],"usage":{"prompt_tokens":1.5,"completion_tokens":-2,"total_tokens":"7"}}"#,
        )
        .unwrap();
        let usage = reply.usage.unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens, usage.total_tokens), (None, None, None));
        let call = &reply.choices[0].delta.as_ref().unwrap().tool_calls[0];
        assert_eq!((call.index, call.id.as_deref(), call.function.name.as_deref()), (None, None, Some("f")));
        let nulls = Reply::parse(r#"{"choices":null}"#).unwrap();
        assert!(nulls.choices.is_empty());
        let calls = Reply::parse(r#"{"choices":[{"delta":{"tool_calls":null}}]}"#).unwrap();
        assert!(calls.choices[0].delta.as_ref().unwrap().tool_calls.is_empty());
    }

    #[test]
    fn odd_ids_models_and_signatures_read_as_absent_not_as_an_unreadable_reply() {
        let reply =
            Reply::parse(r#"{"id":7,"model":{"x":1},"choices":[{"delta":{"content":"a","reasoning_signature":[1]}}]}"#)
                .unwrap();
        assert_eq!((reply.id, reply.model), (None, None));
        let delta = reply.choices[0].delta.as_ref().unwrap();
        assert_eq!((delta.text(), delta.reasoning_signature.as_deref()), (Some("a"), None));
    }
}
