//! Unified request → Anthropic Messages request: system prompt lifted out, tool calls and
//! results as content blocks, consecutive same-role turns merged, thinking budget mapped.

use adapter_kit::errors::adapter_error;
use adapter_kit::http::{join_url, setting_headers};
use adapter_kit::unified::{ChatMessage, ChatRequest, Content, Part, Role, ToolChoice, ToolDef, parse_data_url};
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

pub fn to_messages(unified: &ChatRequest, model: &str) -> Result<Value, AdapterError> {
    let messages = unified
        .messages
        .as_deref()
        .ok_or_else(|| adapter_error(ErrorKind::BadRequest, "`messages` must be an array"))?;
    let mut system: Vec<String> = Vec::new();
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System | Role::Developer => {
                system.push(message.content.text());
                continue;
            }
            Role::Assistant => ("assistant", assistant_blocks(message)),
            Role::Tool | Role::Function => ("user", vec![tool_result(message)]),
            _ => ("user", user_blocks(&message.content)?),
        };
        if blocks.is_empty() {
            continue;
        }
        // Anthropic wants alternating turns: parallel tool results become one user turn.
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
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
    let budget = unified.thinking_budget();
    let mut max = unified.max_tokens().unwrap_or(DEFAULT_MAX_TOKENS);
    if let Some(budget) = budget {
        // budget_tokens must stay below max_tokens; sampling knobs are fixed while thinking.
        max = max.max(budget + DEFAULT_MAX_TOKENS);
        body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
    } else {
        for (key, value) in
            [("temperature", &unified.temperature), ("top_p", &unified.top_p), ("top_k", &unified.top_k)]
        {
            if let Some(value) = value {
                body.insert(key.into(), value.clone());
            }
        }
    }
    body.insert("max_tokens".into(), json!(max));
    if let Some(stops) = &unified.stop {
        body.insert("stop_sequences".into(), json!(stops));
    }
    if let Some(stream) = unified.stream {
        body.insert("stream".into(), json!(stream));
    }
    if let Some(tools) = &unified.tools {
        body.insert("tools".into(), Value::Array(tools.iter().filter_map(tool).collect()));
    }
    if let Some(choice) = tool_choice(unified) {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(user) = &unified.user {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    Ok(Value::Object(body))
}

fn user_blocks(content: &Content) -> Result<Vec<Value>, AdapterError> {
    match content {
        Content::Text(text) => Ok(vec![json!({"type": "text", "text": text})]),
        Content::Parts(parts) => parts.iter().filter_map(|part| user_part(part).transpose()).collect(),
        Content::Absent => Ok(vec![]),
        Content::Other(_) => {
            Err(adapter_error(ErrorKind::BadRequest, "message content must be a string or an array of parts"))
        }
    }
}

fn user_part(part: &Part) -> Result<Option<Value>, AdapterError> {
    match part {
        Part::Text(text) => Ok(Some(json!({"type": "text", "text": text}))),
        Part::ImageUrl { url, .. } => {
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
        Part::Other { kind: Some(kind), raw } if kind == "image" || kind == "document" => Ok(Some(raw.clone())),
        Part::Other { kind: Some(other), .. } => {
            Err(adapter_error(ErrorKind::Unsupported, &format!("content part `{other}` is not supported by Anthropic")))
        }
        Part::Other { kind: None, .. } => Ok(None),
    }
}

fn assistant_blocks(message: &ChatMessage) -> Vec<Value> {
    let mut blocks = Vec::new();
    // Signed thinking goes back first, as Anthropic wants it before the turn's tool calls;
    // unsigned reasoning (another provider's) it would refuse, so it is left out.
    let reasoning = message.reasoning_content.as_deref().filter(|t| !t.is_empty());
    let signature = message.reasoning_signature.as_deref().filter(|s| !s.is_empty());
    if let (Some(thinking), Some(signature)) = (reasoning, signature) {
        blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
    }
    let text = message.content.text();
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in &message.tool_calls {
        let arguments = call.function.arguments.as_deref().unwrap_or("{}");
        let input: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input}));
    }
    blocks
}

fn tool_result(message: &ChatMessage) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": message.content.text(),
    })
}

fn tool(tool: &ToolDef) -> Option<Value> {
    let function = tool.function.as_ref()?;
    let mut out = json!({
        "name": function.name.as_ref()?,
        "input_schema": function.parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    });
    if let Some(description) = &function.description {
        out["description"] = description.clone();
    }
    Some(out)
}

fn tool_choice(unified: &ChatRequest) -> Option<Value> {
    let parallel_off = unified.parallel_tool_calls == Some(false);
    let mut choice = match &unified.tool_choice {
        Some(ToolChoice::None) => json!({"type": "none"}),
        Some(ToolChoice::Required) => json!({"type": "any"}),
        Some(ToolChoice::Function(Some(name))) => json!({"type": "tool", "name": name}),
        Some(_) => json!({"type": "auto"}),
        None if parallel_off => json!({"type": "auto"}),
        None => return None,
    };
    if parallel_off && choice["type"] != "none" {
        choice["disable_parallel_tool_use"] = json!(true);
    }
    Some(choice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unified_chat_becomes_alternating_turns_with_blocks_and_a_lifted_system() {
        let unified = ChatRequest::parse(
            r#"{"max_tokens":100,"temperature":0.5,"stop":"END","user":"u1","parallel_tool_calls":false,
            "tools":[{"type":"function","function":{"name":"w","description":"weather"}},{"type":"function","function":{}}],
            "messages":[{"role":"system","content":"Be terse."},
              {"role":"user","content":[{"type":"text","text":"Weather?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]},
              {"role":"assistant","content":"","reasoning_content":"hm","reasoning_signature":"sig","tool_calls":[{"id":"c1","function":{"name":"w","arguments":"{\"city\":\"Oslo\"}"}},{"id":"c2","function":{"name":"w","arguments":"not json"}}]},
              {"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"rain"}]}]}"#,
        )
        .unwrap();
        let body = to_messages(&unified, "claude").unwrap();
        assert_eq!(body["system"], "Be terse.");
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "Weather?"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "tool_use", "id": "c1", "name": "w", "input": {"city": "Oslo"}},
                    {"type": "tool_use", "id": "c2", "name": "w", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "rain"},
                ]},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"name": "w", "description": "weather", "input_schema": {"type": "object", "properties": {}}}])
        );
        assert_eq!(body["tool_choice"], json!({"type": "auto", "disable_parallel_tool_use": true}));
        assert_eq!((body["max_tokens"].as_u64(), body["temperature"].as_f64()), (Some(100), Some(0.5)));
        assert_eq!(
            (body["stop_sequences"].clone(), body["metadata"]["user_id"].clone()),
            (json!(["END"]), json!("u1"))
        );
    }

    #[test]
    fn thinking_sets_its_budget_drops_sampling_and_a_missing_message_list_is_refused() {
        let unified = ChatRequest::parse(
            r#"{"reasoning_effort":"low","temperature":1,"messages":[{"role":"user","content":"Hi"}]}"#,
        )
        .unwrap();
        let body = to_messages(&unified, "claude").unwrap();
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
        assert_eq!((body["max_tokens"].as_u64(), body.get("temperature")), (Some(2048 + DEFAULT_MAX_TOKENS), None));
        let refused = to_messages(&ChatRequest::parse(r#"{"messages":"Hi"}"#).unwrap(), "claude").unwrap_err();
        assert_eq!(refused.kind, ErrorKind::BadRequest);
        let odd = ChatRequest::parse(r#"{"messages":[{"role":"user","content":[{"type":"audio"}]}]}"#).unwrap();
        assert_eq!(to_messages(&odd, "claude").unwrap_err().kind, ErrorKind::Unsupported);
    }
}
