//! Anthropic Messages request → unified request: system prompt to a system message, content
//! blocks to parts, tool_use to tool_calls, tool_result to tool messages, thinking kept.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Number, Value, json};

use crate::server::error::ApiError;
use crate::server::request::{Lenient, ModelName, null_is_default};
use switchyard_unified::AnthropicImageSource;

/// A Messages request as the gateway reads it, parsed once from the client's bytes: every
/// field the translation reads is named here. What it leaves out (new fields, `document`
/// blocks) stays in those bytes, which go as sent to an upstream that speaks Anthropic.
#[derive(Debug, Deserialize)]
pub struct MessagesRequest<'a> {
    #[serde(borrow)]
    pub model: ModelName<'a>,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub system: Option<Text>,
    #[serde(default)]
    pub stream: bool,
    pub max_tokens: Option<u64>,
    /// Numbers as written (`1` stays `1`, not `1.0`).
    pub temperature: Option<Number>,
    pub top_p: Option<Number>,
    pub top_k: Option<u64>,
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    pub thinking: Option<Thinking>,
    pub output_config: Option<OutputConfig>,
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Content,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    /// Mid-conversation instructions (Claude Code sends one): a unified system message there.
    System,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of content blocks")]
pub enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

/// A string or text blocks (`system`, a tool result's `content`); any other shape reads as
/// no text, and a block that is not one is passed over.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
pub enum Text {
    Plain(String),
    Blocks(Vec<Lenient<TextBlock>>),
    #[default]
    #[serde(skip)]
    Empty,
    Other(IgnoredAny),
}

#[derive(Debug, Deserialize)]
pub struct TextBlock {
    #[serde(default)]
    pub text: Lenient<String>,
    #[serde(default)]
    pub cache_control: Option<IgnoredAny>,
}

impl Text {
    /// The text, blocks joined by blank lines.
    fn joined(&self) -> String {
        match self {
            Text::Plain(text) => text.clone(),
            Text::Blocks(blocks) => {
                blocks.iter().filter_map(|b| b.0.as_ref()?.text.0.as_deref()).collect::<Vec<_>>().join("\n\n")
            }
            Text::Empty | Text::Other(_) => String::new(),
        }
    }

    fn cache_marked(&self) -> bool {
        matches!(self, Text::Blocks(blocks) if blocks.iter().flat_map(|b| &b.0).any(|b| b.cache_control.is_some()))
    }
}

/// One content block. Its wire form is read flat and leniently ([`WireBlock`]): a block type
/// the gateway does not know keeps its name (the translation's error says which), and a field
/// it cannot read fails the translation, not the request, which may still go as sent to an
/// upstream that speaks Anthropic.
#[derive(Debug, Deserialize)]
#[serde(from = "Lenient<WireBlock>")]
pub struct Block {
    pub kind: BlockKind,
    /// Carries a `cache_control` marker.
    pub cache_marked: bool,
}

#[derive(Debug)]
pub enum BlockKind {
    Text {
        text: String,
    },
    Image {
        source: AnthropicImageSource,
    },
    ToolUse {
        id: String,
        name: String,
        input: Option<Value>,
    },
    ToolResult {
        tool_use_id: String,
        content: Text,
        is_error: bool,
    },
    Thinking {
        thinking: String,
        signature: Option<String>,
    },
    /// A type the unified form cannot carry (`document`, `redacted_thinking`, server tools).
    Other(String),
    /// No `type` at all.
    Untyped,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireBlock {
    #[serde(rename = "type")]
    kind: Lenient<String>,
    text: Lenient<String>,
    thinking: Lenient<String>,
    signature: Lenient<String>,
    id: Lenient<String>,
    name: Lenient<String>,
    input: Option<Value>,
    tool_use_id: Lenient<String>,
    content: Text,
    is_error: Lenient<bool>,
    /// An image's source; other blocks' `source` (a search result's URL string) is not read.
    source: Lenient<AnthropicImageSource>,
    cache_control: Option<IgnoredAny>,
}

impl From<Lenient<WireBlock>> for Block {
    fn from(Lenient(wire): Lenient<WireBlock>) -> Block {
        // Not an object at all: a block with no type.
        let w = wire.unwrap_or_default();
        let kind = match w.kind.0.as_deref() {
            Some("text") => BlockKind::Text { text: w.text.0.unwrap_or_default() },
            Some("image") => BlockKind::Image { source: w.source.0.unwrap_or_default() },
            Some("tool_use") => BlockKind::ToolUse {
                id: w.id.0.unwrap_or_default(),
                name: w.name.0.unwrap_or_default(),
                input: w.input,
            },
            Some("tool_result") => BlockKind::ToolResult {
                tool_use_id: w.tool_use_id.0.unwrap_or_default(),
                content: w.content,
                is_error: w.is_error.0.unwrap_or(false),
            },
            Some("thinking") => {
                BlockKind::Thinking { thinking: w.thinking.0.unwrap_or_default(), signature: w.signature.0 }
            }
            Some(other) => BlockKind::Other(other.to_string()),
            None => BlockKind::Untyped,
        };
        Block { kind, cache_marked: w.cache_control.is_some() }
    }
}

#[derive(Debug, Deserialize)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// The JSON Schema, passed on as written.
    pub input_schema: Option<Value>,
    pub cache_control: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
pub struct ToolChoice {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub name: Option<String>,
    #[serde(default, deserialize_with = "null_is_default")]
    pub disable_parallel_tool_use: bool,
}

/// `thinking`: `enabled` (with its budget, passed on whole), `disabled`, or `adaptive`.
#[derive(Debug, Deserialize)]
pub struct Thinking {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// The rest (`budget_tokens`, whatever comes next), as written.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

#[derive(Debug, Deserialize)]
pub struct OutputConfig {
    pub effort: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Metadata {
    pub user_id: Option<String>,
}

/// Translates a checked Messages request into the unified form.
pub fn to_unified(request: &MessagesRequest<'_>) -> Result<Value, ApiError> {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        let text = system.joined();
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    for (i, message) in request.messages.iter().enumerate() {
        match (message.role, &message.content) {
            (Role::System, content) => {
                let text = match content {
                    Content::Text(text) => text.clone(),
                    Content::Blocks(blocks) => blocks_text(blocks),
                };
                if !text.is_empty() {
                    messages.push(json!({"role": "system", "content": text}));
                }
            }
            (role, Content::Text(text)) => messages.push(json!({"role": role.as_str(), "content": text})),
            (Role::Assistant, Content::Blocks(blocks)) => messages.push(assistant(blocks)),
            (Role::User, Content::Blocks(blocks)) => {
                user(blocks, &mut messages).map_err(|e| e.param(format!("messages[{i}].content")))?
            }
        }
    }

    let mut out = Map::new();
    out.insert("model".into(), json!(&*request.model));
    out.insert("messages".into(), Value::Array(messages));
    if let Some(max_tokens) = request.max_tokens {
        out.insert("max_tokens".into(), json!(max_tokens));
    }
    if let Some(temperature) = &request.temperature {
        out.insert("temperature".into(), Value::Number(temperature.clone()));
    }
    if let Some(top_p) = &request.top_p {
        out.insert("top_p".into(), Value::Number(top_p.clone()));
    }
    if let Some(top_k) = request.top_k {
        out.insert("top_k".into(), json!(top_k));
    }
    if let Some(stop) = &request.stop_sequences {
        out.insert("stop".into(), json!(stop));
    }
    if request.stream {
        out.insert("stream".into(), json!(true));
        // message_delta reports usage, so the unified stream must carry it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    // `enabled` carries its budget; `adaptive` lets the model decide, which the unified form
    // says as an effort hint (`output_config.effort`, else medium); only `disabled` is off. A
    // hint, not `reasoning_effort`: models that take no effort refuse that field, so each
    // adapter decides whether its upstream takes one.
    let effort = request.output_config.as_ref().and_then(|c| c.effort.as_deref());
    match request.thinking.as_ref().map(|t| (t.kind.as_deref(), t)) {
        Some((Some("enabled"), thinking)) => {
            let mut whole = Map::new();
            whole.insert("type".into(), json!("enabled"));
            whole.extend(thinking.rest.iter().map(|(k, v)| (k.clone(), v.clone())));
            out.insert("thinking".into(), Value::Object(whole));
        }
        Some((Some("disabled"), _)) => {
            out.insert("disable_thinking".into(), json!(true));
        }
        Some((Some(_), _)) => {
            out.insert("reasoning_effort_hint".into(), json!(effort.unwrap_or("medium")));
        }
        Some((None, _)) | None => {
            if let Some(effort) = effort {
                out.insert("reasoning_effort_hint".into(), json!(effort));
            }
        }
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let parameters = t.input_schema.clone().unwrap_or_else(|| json!({"type": "object"}));
                let mut function = json!({"name": t.name, "parameters": parameters});
                if let Some(d) = &t.description {
                    function["description"] = json!(d);
                }
                json!({"type": "function", "function": function})
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = &request.tool_choice {
        let unified = match choice.kind.as_deref() {
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => json!({"type": "function", "function": {"name": choice.name}}),
            _ => json!("auto"),
        };
        out.insert("tool_choice".into(), unified);
        if choice.disable_parallel_tool_use {
            out.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    if let Some(user) = request.metadata.as_ref().and_then(|m| m.user_id.as_ref()) {
        out.insert("user".into(), json!(user));
    }
    if let Some(key) = cache_key(request) {
        out.insert("prompt_cache_key_hint".into(), json!(key));
    }
    Ok(Value::Object(out))
}

/// A request with `cache_control` markers asks for its prefix to be cached; OpenAI's nearest is
/// `prompt_cache_key`, which routes requests with the same prefix to the same cache. The key:
/// a hash of what Claude Code marks (the system prompt and the tools), the same on every turn.
fn cache_key(request: &MessagesRequest<'_>) -> Option<String> {
    let marked = request.system.as_ref().is_some_and(Text::cache_marked)
        || request.tools.iter().any(|t| t.cache_control.is_some())
        || request
            .messages
            .iter()
            .any(|m| matches!(&m.content, Content::Blocks(b) if b.iter().any(|b| b.cache_marked)));
    if !marked {
        return None;
    }
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(request.system.as_ref().map(Text::joined).unwrap_or_default());
    hasher.update([0]);
    for tool in &request.tools {
        hasher.update(&tool.name);
        hasher.update([0]);
        hasher.update(tool.description.as_deref().unwrap_or_default());
        hasher.update([0]);
        hasher.update(tool.input_schema.as_ref().map(Value::to_string).unwrap_or_default());
        hasher.update([0]);
    }
    let hex: String = hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
    Some(format!("sy-{hex}"))
}

/// The text of `text` blocks joined by blank lines.
fn blocks_text(blocks: &[Block]) -> String {
    blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn assistant(blocks: &[Block]) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut signature = None;
    let mut calls = Vec::new();
    for block in blocks {
        match &block.kind {
            BlockKind::Text { text: t } => text.push_str(t),
            BlockKind::Thinking { thinking, signature: s } => {
                reasoning.push_str(thinking);
                signature = s.as_deref().filter(|s| !s.is_empty()).or(signature);
            }
            BlockKind::ToolUse { id, name, input } => calls.push(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": input.as_ref().map(Value::to_string).unwrap_or_else(|| "{}".into())},
            })),
            _ => {}
        }
    }
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) }});
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
        if let Some(signature) = signature {
            message["reasoning_signature"] = json!(signature);
        }
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    message
}

/// User blocks: tool results become `tool` messages (before the rest of the turn, as the
/// tool-call protocol requires); text and images become one user message of parts.
fn user(blocks: &[Block], messages: &mut Vec<Value>) -> Result<(), ApiError> {
    let mut parts = Vec::new();
    for block in blocks {
        match &block.kind {
            BlockKind::ToolResult { tool_use_id, content, is_error } => {
                let mut content = content.joined();
                if *is_error && !content.starts_with("Error") {
                    content = format!("Error: {content}");
                }
                messages.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
            }
            BlockKind::Text { text } => parts.push(json!({"type": "text", "text": text})),
            BlockKind::Image { source } => {
                let Some(url) = source.url() else {
                    return Err(ApiError::invalid_request("image source must be base64 or url"));
                };
                parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
            }
            BlockKind::Other(other) => {
                return Err(ApiError::invalid_request(format!("content block type `{other}` is not supported")));
            }
            BlockKind::Untyped => {
                return Err(ApiError::invalid_request("every content block needs a `type`"));
            }
            BlockKind::ToolUse { .. } => {
                return Err(ApiError::invalid_request("content block type `tool_use` is not supported"));
            }
            BlockKind::Thinking { .. } => {
                return Err(ApiError::invalid_request("content block type `thinking` is not supported"));
            }
        }
    }
    if !parts.is_empty() {
        messages.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}
