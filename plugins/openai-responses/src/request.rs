//! Unified (chat) request → Responses request: the leading system messages become
//! `instructions`, later ones developer messages in place; tool calls and results become
//! `function_call` / `function_call_output` items; chat tools become flat function tools.

use adapter_kit::errors::adapter_error;
use adapter_kit::unified::{ChatRequest, Content, Part, Role, ToolChoice};
use adapter_kit::{AdapterError, ErrorKind};
use serde_json::{Map, Value, json};

pub fn to_responses(unified: &ChatRequest, model: &str) -> Result<Value, AdapterError> {
    let messages = unified
        .messages
        .as_deref()
        .ok_or_else(|| adapter_error(ErrorKind::BadRequest, "`messages` must be an array"))?;
    let mut instructions: Vec<String> = Vec::new();
    let mut input = Vec::new();
    for message in messages {
        match message.role {
            Role::System | Role::Developer if input.is_empty() => instructions.push(message.content.text()),
            Role::System | Role::Developer => {
                input.push(json!({"type": "message", "role": "developer", "content": message.content.text()}))
            }
            Role::Assistant => {
                let text = message.content.text();
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "content": text}));
                }
                for call in &message.tool_calls {
                    input.push(json!({
                        "type": "function_call", "call_id": call.id, "name": call.function.name,
                        "arguments": call.function.arguments.as_deref().unwrap_or("{}"),
                    }));
                }
            }
            Role::Tool => input.push(json!({
                "type": "function_call_output", "call_id": message.tool_call_id,
                "output": message.content.text(),
            })),
            _ => input.push(json!({"type": "message", "role": "user", "content": user_content(&message.content)?})),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("input".into(), Value::Array(input));
    if !instructions.is_empty() {
        body.insert("instructions".into(), json!(instructions.join("\n\n")));
    }
    // The gateway keeps the conversation; nothing is left stored upstream on its behalf.
    body.insert("store".into(), json!(false));
    if let Some(max) = unified.max_tokens() {
        body.insert("max_output_tokens".into(), json!(max));
    }
    for (field, value) in [
        ("temperature", &unified.temperature),
        ("top_p", &unified.top_p),
        ("prompt_cache_key", &unified.prompt_cache_key),
        ("safety_identifier", &unified.safety_identifier),
        ("metadata", &unified.metadata),
    ] {
        if let Some(value) = value {
            body.insert(field.into(), value.clone());
        }
    }
    if let Some(parallel) = unified.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), json!(parallel));
    }
    if !body.contains_key("prompt_cache_key")
        && let Some(hint) = &unified.prompt_cache_key_hint
    {
        body.insert("prompt_cache_key".into(), json!(hint));
    }
    if let Some(user) = &unified.user {
        body.insert("safety_identifier".into(), json!(user));
    }
    if unified.streams() {
        body.insert("stream".into(), json!(true));
    }
    if !unified.thinking_off()
        && let Some(effort) = unified.effort()
    {
        body.insert("reasoning".into(), json!({"effort": effort, "summary": "auto"}));
    }
    if let Some(format) = &unified.response_format {
        match format.kind.as_deref() {
            Some("json_schema") => {
                let schema = format.json_schema.as_ref();
                let mut text = json!({"type": "json_schema", "name": schema.and_then(|s| s.name.as_ref()), "schema": schema.and_then(|s| s.schema.as_ref())});
                if let Some(strict) = schema.and_then(|s| s.strict.as_ref()) {
                    text["strict"] = strict.clone();
                }
                body.insert("text".into(), json!({"format": text}));
            }
            Some("json_object") => {
                body.insert("text".into(), json!({"format": {"type": "json_object"}}));
            }
            _ => {}
        }
    }
    let tools: Vec<Value> = unified
        .tools
        .iter()
        .flatten()
        .filter(|t| t.kind.as_deref() == Some("function"))
        .filter_map(|t| t.function.as_ref())
        .map(|f| {
            let mut tool = json!({"type": "function", "name": f.name, "parameters": f.parameters.clone().unwrap_or_else(|| json!({"type": "object"}))});
            for (field, value) in [("description", &f.description), ("strict", &f.strict)] {
                if let Some(value) = value {
                    tool[field] = value.clone();
                }
            }
            tool
        })
        .collect();
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = &unified.tool_choice {
            let choice = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Function(Some(name)) => json!({"type": "function", "name": name}),
                // A choice naming no function: one of the tools, as the client required.
                ToolChoice::Function(None) => json!("required"),
                ToolChoice::Unknown(other) => other.clone(),
            };
            body.insert("tool_choice".into(), choice);
        }
    }
    Ok(Value::Object(body))
}

/// A user turn's content: a string, or parts (`text` → `input_text`, `image_url` → `input_image`).
fn user_content(content: &Content) -> Result<Value, AdapterError> {
    let Content::Parts(parts) = content else {
        return Ok(json!(content.text()));
    };
    let mut out = Vec::new();
    for part in parts {
        match part {
            Part::Text(text) => out.push(json!({"type": "input_text", "text": text})),
            Part::ImageUrl { url, detail } => out
                .push(json!({"type": "input_image", "image_url": url, "detail": detail.as_deref().unwrap_or("auto")})),
            Part::Other { kind, .. } => {
                return Err(adapter_error(
                    ErrorKind::Unsupported,
                    &format!("content part `{}` has no Responses equivalent", kind.as_deref().unwrap_or("untyped")),
                ));
            }
        }
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_with_tools_becomes_instructions_items_and_flat_tools() {
        let unified = json!({
            "model": "m", "max_tokens": 100, "stream": true, "reasoning_effort": "low",
            "messages": [
                {"role": "system", "content": "Be terse."},
                {"role": "user", "content": [{"type": "text", "text": "Weather?"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                {"role": "system", "content": "Answer in French."},
            ],
            "tools": [{"type": "function", "function": {"name": "w", "description": "weather", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "w"}},
        });
        let body = to_responses(&ChatRequest::parse(&unified.to_string()).unwrap(), "gpt-5").unwrap();
        assert_eq!(body["instructions"], "Be terse.");
        assert_eq!(
            body["input"],
            json!([
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}, {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"}]},
                {"type": "function_call", "call_id": "call_1", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
                {"type": "message", "role": "developer", "content": "Answer in French."},
            ])
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "w", "description": "weather", "parameters": {"type": "object"}}])
        );
        assert_eq!(body["tool_choice"], json!({"type": "function", "name": "w"}));
        let mut unnamed = unified.clone();
        unnamed["tool_choice"] = json!({"type": "allowed_tools", "allowed_tools": {"mode": "required"}});
        let unnamed = to_responses(&ChatRequest::parse(&unnamed.to_string()).unwrap(), "gpt-5").unwrap();
        assert_eq!(unnamed["tool_choice"], "required", "a choice naming no function is no `name: null`");
        assert_eq!((body["max_output_tokens"].as_u64(), body["store"].as_bool()), (Some(100), Some(false)));
        assert_eq!(body["reasoning"]["effort"], "low");
    }
}
