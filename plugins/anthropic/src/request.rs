//! Unified request → Anthropic Messages request: system prompt lifted out, tool calls and
//! results as content blocks, consecutive same-role turns merged, thinking budget mapped.

use adapter_kit::errors::adapter_error;
use adapter_kit::http::{join_url, setting_headers};
use adapter_kit::unified::{content_text, max_tokens, parse_data_url, stop_sequences, thinking_budget};
use adapter_kit::{AdapterError, ErrorKind, HttpRequest, SourceContext, setting};
use serde_json::{Map, Value, json};

const DEFAULT_MAX_TOKENS: u64 = 4096;
const API_VERSION: &str = "2023-06-01";

pub fn http(ctx: &SourceContext, body: Value) -> Result<HttpRequest, AdapterError> {
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("anthropic-version".to_string(), setting(ctx, "anthropic_version").unwrap_or(API_VERSION).to_string()),
    ];
    if !ctx.api_key.is_empty() {
        headers.push(("x-api-key".into(), ctx.api_key.clone()));
    }
    if let Some(beta) = setting(ctx, "anthropic_beta") {
        headers.push(("anthropic-beta".into(), beta.to_string()));
    }
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        headers.push(("accept".into(), "text/event-stream".into()));
    }
    headers.extend(setting_headers(&ctx.settings));
    Ok(HttpRequest {
        method: "POST".into(),
        url: join_url(&ctx.base_url, setting(ctx, "path").unwrap_or("/messages")),
        headers,
        body: serde_json::to_vec(&body).expect("JSON serialises"),
    })
}

pub fn to_messages(unified: &Map<String, Value>, model: &str) -> Result<Value, AdapterError> {
    let messages = unified
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| adapter_error(ErrorKind::BadRequest, "`messages` must be an array"))?;
    let mut system: Vec<String> = Vec::new();
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    for message in messages {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("user");
        let (role, blocks) = match role {
            "system" | "developer" => {
                system.push(content_text(message.get("content").unwrap_or(&Value::Null)));
                continue;
            }
            "assistant" => ("assistant", assistant_blocks(message)),
            "tool" | "function" => ("user", vec![tool_result(message)]),
            _ => ("user", user_blocks(message.get("content").unwrap_or(&Value::Null))?),
        };
        if blocks.is_empty() {
            continue;
        }
        // Anthropic wants alternating turns: parallel tool results become one user turn.
        match turns.last_mut() {
            Some((last, existing)) if last == role => existing.extend(blocks),
            _ => turns.push((role.to_string(), blocks)),
        }
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "messages".into(),
        Value::Array(turns.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect()),
    );
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    let budget = thinking_budget(unified);
    let mut max = max_tokens(unified).unwrap_or(DEFAULT_MAX_TOKENS);
    if let Some(budget) = budget {
        // budget_tokens must stay below max_tokens; sampling knobs are fixed while thinking.
        max = max.max(budget + DEFAULT_MAX_TOKENS);
        body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
    } else {
        for key in ["temperature", "top_p", "top_k"] {
            if let Some(v) = unified.get(key) {
                body.insert(key.into(), v.clone());
            }
        }
    }
    body.insert("max_tokens".into(), json!(max));
    if let Some(stops) = stop_sequences(unified) {
        body.insert("stop_sequences".into(), json!(stops));
    }
    if let Some(stream) = unified.get("stream").and_then(Value::as_bool) {
        body.insert("stream".into(), json!(stream));
    }
    if let Some(tools) = unified.get("tools").and_then(Value::as_array) {
        body.insert("tools".into(), Value::Array(tools.iter().filter_map(tool).collect()));
    }
    if let Some(choice) = tool_choice(unified) {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(user) = unified.get("user").and_then(Value::as_str) {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    Ok(Value::Object(body))
}

fn user_blocks(content: &Value) -> Result<Vec<Value>, AdapterError> {
    match content {
        Value::String(text) => Ok(vec![json!({"type": "text", "text": text})]),
        Value::Array(parts) => parts.iter().filter_map(|part| user_part(part).transpose()).collect(),
        Value::Null => Ok(vec![]),
        _ => Err(adapter_error(ErrorKind::BadRequest, "message content must be a string or an array of parts")),
    }
}

fn user_part(part: &Value) -> Result<Option<Value>, AdapterError> {
    match part.get("type").and_then(Value::as_str) {
        Some("text") => Ok(Some(json!({"type": "text", "text": part.get("text").cloned().unwrap_or(json!(""))}))),
        Some("image_url") => {
            let url = part
                .get("image_url")
                .and_then(|i| i.get("url").or(Some(i)))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let source = match parse_data_url(url) {
                Some((media_type, data)) => json!({"type": "base64", "media_type": media_type, "data": data}),
                None if url.starts_with("http://") || url.starts_with("https://") => json!({"type": "url", "url": url}),
                None => {
                    return Err(adapter_error(
                        ErrorKind::BadRequest,
                        "image_url must be a data: URL or an http(s) URL",
                    ));
                }
            };
            Ok(Some(json!({"type": "image", "source": source})))
        }
        // Blocks already in Anthropic form (documents, cached text) pass through.
        Some("image" | "document") => Ok(Some(part.clone())),
        Some(other) => {
            Err(adapter_error(ErrorKind::Unsupported, &format!("content part `{other}` is not supported by Anthropic")))
        }
        None => Ok(None),
    }
}

fn assistant_blocks(message: &Value) -> Vec<Value> {
    let mut blocks = Vec::new();
    // Signed thinking goes back first, as Anthropic wants it before the turn's tool calls;
    // unsigned reasoning (another provider's) it would refuse, so it is left out.
    let reasoning = message.get("reasoning_content").and_then(Value::as_str).filter(|t| !t.is_empty());
    let signature = message.get("reasoning_signature").and_then(Value::as_str).filter(|s| !s.is_empty());
    if let (Some(thinking), Some(signature)) = (reasoning, signature) {
        blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
    }
    let text = content_text(message.get("content").unwrap_or(&Value::Null));
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let function = call.get("function").cloned().unwrap_or_default();
        let arguments = function.get("arguments").and_then(Value::as_str).unwrap_or("{}");
        let input: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
        blocks.push(json!({"type": "tool_use", "id": call.get("id").cloned().unwrap_or_default(), "name": function.get("name").cloned().unwrap_or_default(), "input": input}));
    }
    blocks
}

fn tool_result(message: &Value) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id").cloned().unwrap_or_default(),
        "content": content_text(message.get("content").unwrap_or(&Value::Null)),
    })
}

fn tool(tool: &Value) -> Option<Value> {
    let function = tool.get("function")?;
    let mut out = json!({
        "name": function.get("name")?,
        "input_schema": function.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    });
    if let Some(description) = function.get("description") {
        out["description"] = description.clone();
    }
    Some(out)
}

fn tool_choice(unified: &Map<String, Value>) -> Option<Value> {
    let parallel_off = unified.get("parallel_tool_calls").and_then(Value::as_bool) == Some(false);
    let mut choice = match unified.get("tool_choice") {
        Some(Value::String(s)) if s == "none" => json!({"type": "none"}),
        Some(Value::String(s)) if s == "required" => json!({"type": "any"}),
        Some(Value::Object(o)) => match o.get("function").and_then(|f| f.get("name")) {
            Some(name) => json!({"type": "tool", "name": name}),
            None => json!({"type": "auto"}),
        },
        Some(_) => json!({"type": "auto"}),
        None if parallel_off => json!({"type": "auto"}),
        None => return None,
    };
    if parallel_off && choice["type"] != "none" {
        choice["disable_parallel_tool_use"] = json!(true);
    }
    Some(choice)
}
