//! Anthropic Messages request → unified request: system prompt to a system message, content
//! blocks to parts, tool_use to tool_calls, tool_result to tool messages, thinking kept.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value, json};

use crate::server::error::ApiError;
use crate::server::request::Checked;

/// The fields checked before translating (checked on the parsed body, borrowing from it:
/// nothing large is copied); the translation reads the JSON value after.
#[derive(Debug, Deserialize)]
pub struct MessagesRequest<'a> {
    #[serde(borrow)]
    pub model: crate::server::request::ModelName<'a>,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub stream: bool,
    #[serde(rename = "max_tokens")]
    _max_tokens: Option<Checked<u64>>,
    #[serde(rename = "temperature")]
    _temperature: Option<Checked<f64>>,
    #[serde(rename = "top_p")]
    _top_p: Option<Checked<f64>>,
    #[serde(rename = "top_k")]
    _top_k: Option<Checked<u64>>,
    #[serde(rename = "stop_sequences")]
    _stop_sequences: Option<Checked<Vec<String>>>,
    #[serde(rename = "tools")]
    _tools: Option<Vec<Tool>>,
}

#[derive(Debug, Deserialize)]
pub struct Message {
    #[serde(rename = "role")]
    _role: Checked<Role>,
    /// Required; its shape is checked where it is translated.
    #[serde(rename = "content")]
    _content: IgnoredAny,
}

#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    /// Mid-conversation instructions (Claude Code sends one): a unified system message there.
    System,
}

#[derive(Debug, Deserialize)]
pub struct Tool {
    #[serde(rename = "name")]
    _name: Checked<String>,
}

/// Translates a validated Messages request (as JSON) into the unified form.
pub fn to_unified(request: &Map<String, Value>) -> Result<Value, ApiError> {
    let mut messages = Vec::new();
    if let Some(system) = request.get("system") {
        let text = blocks_text(system);
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    for (i, message) in request.get("messages").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let role = message["role"].as_str().unwrap_or("user");
        if role == "system" {
            let text = blocks_text(&message["content"]);
            if !text.is_empty() {
                messages.push(json!({"role": "system", "content": text}));
            }
            continue;
        }
        match &message["content"] {
            Value::String(text) => messages.push(json!({"role": role, "content": text})),
            Value::Array(blocks) if role == "assistant" => messages.push(assistant(blocks)),
            Value::Array(blocks) => {
                user(blocks, &mut messages).map_err(|e| e.param(format!("messages[{i}].content")))?
            }
            _ => {
                return Err(ApiError::invalid_request("content must be a string or an array of blocks")
                    .param(format!("messages[{i}].content")));
            }
        }
    }

    let mut out = Map::new();
    out.insert("model".into(), request["model"].clone());
    out.insert("messages".into(), Value::Array(messages));
    for (from, to) in [
        ("max_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
        ("stop_sequences", "stop"),
    ] {
        if let Some(v) = request.get(from) {
            out.insert(to.into(), v.clone());
        }
    }
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream".into(), json!(true));
        // message_delta reports usage, so the unified stream must carry it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    // `enabled` carries its budget; `adaptive` lets the model decide, which the unified form
    // says as an effort hint (`output_config.effort`, else medium); only `disabled` is off. A
    // hint, not `reasoning_effort`: models that take no effort refuse that field, so each
    // adapter decides whether its upstream takes one.
    let effort = request.get("output_config").and_then(|c| c.get("effort")).and_then(Value::as_str);
    match request.get("thinking").and_then(|t| t["type"].as_str()) {
        Some("enabled") => {
            out.insert("thinking".into(), request["thinking"].clone());
        }
        Some("disabled") => {
            out.insert("disable_thinking".into(), json!(true));
        }
        Some(_) => {
            out.insert("reasoning_effort_hint".into(), json!(effort.unwrap_or("medium")));
        }
        None => {
            if let Some(effort) = effort {
                out.insert("reasoning_effort_hint".into(), json!(effort));
            }
        }
    }
    if let Some(tools) = request.get("tools").and_then(Value::as_array) {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                let mut function = json!({"name": t["name"], "parameters": t.get("input_schema").cloned().unwrap_or_else(|| json!({"type": "object"}))});
                if let Some(d) = t.get("description") {
                    function["description"] = d.clone();
                }
                json!({"type": "function", "function": function})
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = request.get("tool_choice") {
        let unified = match choice["type"].as_str() {
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => json!({"type": "function", "function": {"name": choice["name"]}}),
            _ => json!("auto"),
        };
        out.insert("tool_choice".into(), unified);
        if choice["disable_parallel_tool_use"] == true {
            out.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    if let Some(user) = request.get("metadata").and_then(|m| m.get("user_id")) {
        out.insert("user".into(), user.clone());
    }
    if let Some(key) = cache_key(request) {
        out.insert("prompt_cache_key_hint".into(), json!(key));
    }
    Ok(Value::Object(out))
}

/// A request with `cache_control` markers asks for its prefix to be cached; OpenAI's nearest is
/// `prompt_cache_key`, which routes requests with the same prefix to the same cache. The key:
/// a hash of what Claude Code marks (system and tools), the same on every turn.
fn cache_key(request: &Map<String, Value>) -> Option<String> {
    let marked =
        ["system", "tools", "messages"].iter().any(|f| request.get(*f).is_some_and(|v| has_cache_control(v, 0)));
    if !marked {
        return None;
    }
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for field in ["system", "tools"] {
        hasher.update(request.get(field).map(Value::to_string).unwrap_or_default());
        hasher.update([0]);
    }
    let hex: String = hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
    Some(format!("sy-{hex}"))
}

/// Whether a `cache_control` member appears at most a few levels down (blocks, tools, turns).
fn has_cache_control(value: &Value, depth: u8) -> bool {
    match value {
        Value::Object(map) => {
            map.contains_key("cache_control") || (depth < 4 && map.values().any(|v| has_cache_control(v, depth + 1)))
        }
        Value::Array(items) => depth < 4 && items.iter().any(|v| has_cache_control(v, depth + 1)),
        _ => false,
    }
}

/// A string, or the text of `text` blocks joined by blank lines.
fn blocks_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n\n"),
        _ => String::new(),
    }
}

fn assistant(blocks: &[Value]) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut signature = None;
    let mut calls = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("thinking") => {
                reasoning.push_str(block["thinking"].as_str().unwrap_or_default());
                signature = block["signature"].as_str().filter(|s| !s.is_empty()).or(signature);
            }
            Some("tool_use") => calls.push(json!({
                "id": block["id"],
                "type": "function",
                "function": {"name": block["name"], "arguments": block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into())},
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
fn user(blocks: &[Value], messages: &mut Vec<Value>) -> Result<(), ApiError> {
    let mut parts = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("tool_result") => {
                let mut content = blocks_text(&block["content"]);
                if block["is_error"] == true && !content.starts_with("Error") {
                    content = format!("Error: {content}");
                }
                messages.push(json!({"role": "tool", "tool_call_id": block["tool_use_id"], "content": content}));
            }
            Some("text") => parts.push(json!({"type": "text", "text": block["text"]})),
            Some("image") => {
                let Some(url) = switchyard_unified::anthropic_image_url(&block["source"]) else {
                    return Err(ApiError::invalid_request("image source must be base64 or url"));
                };
                parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
            }
            Some(other) => {
                return Err(ApiError::invalid_request(format!("content block type `{other}` is not supported")));
            }
            None => {
                return Err(ApiError::invalid_request("every content block needs a `type`"));
            }
        }
    }
    if !parts.is_empty() {
        messages.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}
