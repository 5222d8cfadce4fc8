//! Unified (chat) request → Responses request: the leading system messages become
//! `instructions`, later ones developer messages in place; tool calls and results become
//! `function_call` / `function_call_output` items; chat tools become flat function tools.

use adapter_kit::errors::adapter_error;
use adapter_kit::unified::{content_text, max_tokens};
use adapter_kit::{AdapterError, ErrorKind};
use serde_json::{Map, Value, json};

pub fn to_responses(unified: &Map<String, Value>, model: &str) -> Result<Value, AdapterError> {
    let messages = unified
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| adapter_error(ErrorKind::BadRequest, "`messages` must be an array"))?;
    let mut instructions: Vec<String> = Vec::new();
    let mut input = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap_or("user");
        match role {
            "system" | "developer" if input.is_empty() => instructions.push(content_text(&message["content"])),
            "system" | "developer" => input
                .push(json!({"type": "message", "role": "developer", "content": content_text(&message["content"])})),
            "assistant" => {
                let text = content_text(&message["content"]);
                if !text.is_empty() {
                    input.push(json!({"type": "message", "role": "assistant", "content": text}));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    input.push(json!({
                        "type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"].as_str().unwrap_or("{}"),
                    }));
                }
            }
            "tool" => input.push(json!({
                "type": "function_call_output", "call_id": message["tool_call_id"],
                "output": content_text(&message["content"]),
            })),
            _ => input.push(json!({"type": "message", "role": "user", "content": user_content(&message["content"])?})),
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
    if let Some(max) = max_tokens(unified) {
        body.insert("max_output_tokens".into(), json!(max));
    }
    for field in ["temperature", "top_p", "parallel_tool_calls", "prompt_cache_key", "safety_identifier", "metadata"] {
        if let Some(value) = unified.get(field).filter(|v| !v.is_null()) {
            body.insert(field.into(), value.clone());
        }
    }
    if !body.contains_key("prompt_cache_key")
        && let Some(hint) = unified.get("prompt_cache_key_hint").filter(|v| v.is_string())
    {
        body.insert("prompt_cache_key".into(), hint.clone());
    }
    if let Some(user) = unified.get("user").filter(|v| v.is_string()) {
        body.insert("safety_identifier".into(), user.clone());
    }
    if unified.get("stream").and_then(Value::as_bool) == Some(true) {
        body.insert("stream".into(), json!(true));
    }
    if unified.get("disable_thinking").and_then(Value::as_bool) != Some(true)
        && let Some(effort) = adapter_kit::unified::effort(unified)
    {
        body.insert("reasoning".into(), json!({"effort": effort, "summary": "auto"}));
    }
    if let Some(format) = unified.get("response_format") {
        match format["type"].as_str() {
            Some("json_schema") => {
                let schema = &format["json_schema"];
                let mut text = json!({"type": "json_schema", "name": schema["name"], "schema": schema["schema"]});
                if let Some(strict) = schema.get("strict") {
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
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "function")
        .map(|t| {
            let f = &t["function"];
            let mut tool = json!({"type": "function", "name": f["name"], "parameters": f.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object"}))});
            for field in ["description", "strict"] {
                if let Some(v) = f.get(field).filter(|v| !v.is_null()) {
                    tool[field] = v.clone();
                }
            }
            tool
        })
        .collect();
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = unified.get("tool_choice") {
            let choice = match choice {
                Value::Object(_) => json!({"type": "function", "name": choice["function"]["name"]}),
                other => other.clone(),
            };
            body.insert("tool_choice".into(), choice);
        }
    }
    Ok(Value::Object(body))
}

/// A user turn's content: a string, or parts (`text` → `input_text`, `image_url` → `input_image`).
fn user_content(content: &Value) -> Result<Value, AdapterError> {
    let Value::Array(parts) = content else {
        return Ok(json!(content_text(content)));
    };
    let mut out = Vec::new();
    for part in parts {
        match part["type"].as_str() {
            Some("text") => out.push(json!({"type": "input_text", "text": part["text"]})),
            Some("image_url") => {
                let image = &part["image_url"];
                let url = image.as_str().or(image["url"].as_str()).unwrap_or_default();
                out.push(json!({"type": "input_image", "image_url": url, "detail": image["detail"].as_str().unwrap_or("auto")}));
            }
            other => {
                return Err(adapter_error(
                    ErrorKind::Unsupported,
                    &format!("content part `{}` has no Responses equivalent", other.unwrap_or("untyped")),
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
        let body = to_responses(unified.as_object().unwrap(), "gpt-5").unwrap();
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
        assert_eq!((body["max_output_tokens"].as_u64(), body["store"].as_bool()), (Some(100), Some(false)));
        assert_eq!(body["reasoning"]["effort"], "low");
    }
}
