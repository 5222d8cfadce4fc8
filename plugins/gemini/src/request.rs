//! Unified request → `GenerateContentRequest`: system prompt to `systemInstruction`, turns to
//! `contents` (assistant = `model`), tool calls and results to `functionCall` /
//! `functionResponse` parts, sampling and thinking to `generationConfig`.

use std::collections::HashMap;

use adapter_kit::errors::adapter_error;
use adapter_kit::unified::{content_text, max_tokens, parse_data_url, stop_sequences, thinking_budget};
use adapter_kit::{AdapterError, ErrorKind};
use serde_json::{Map, Value, json};

pub fn to_generate_content(unified: &Map<String, Value>) -> Result<Value, AdapterError> {
    let mut system = Vec::new();
    let mut contents: Vec<(String, Vec<Value>)> = Vec::new();
    // functionResponse needs the function's name; tool messages only carry the call id.
    let mut call_names: HashMap<String, String> = HashMap::new();
    for message in unified.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let (role, parts) = match message["role"].as_str().unwrap_or("user") {
            "system" | "developer" => {
                system.push(json!({"text": content_text(&message["content"])}));
                continue;
            }
            "assistant" => {
                let mut parts = Vec::new();
                let text = content_text(&message["content"]);
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    let name = call["function"]["name"].as_str().unwrap_or_default().to_string();
                    call_names.insert(call["id"].as_str().unwrap_or_default().to_string(), name.clone());
                    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or("{}"))
                        .unwrap_or(json!({}));
                    parts.push(json!({"functionCall": {"name": name, "args": args}}));
                }
                ("model", parts)
            }
            "tool" | "function" => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let name = call_names
                    .get(id)
                    .cloned()
                    .or_else(|| message["name"].as_str().map(str::to_string))
                    .unwrap_or_default();
                let text = content_text(&message["content"]);
                let response = serde_json::from_str::<Value>(&text)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({"result": text}));
                ("user", vec![json!({"functionResponse": {"name": name, "response": response}})])
            }
            _ => ("user", user_parts(&message["content"])?),
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last, existing)) if last == role => existing.extend(parts),
            _ => contents.push((role.to_string(), parts)),
        }
    }

    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(contents.into_iter().map(|(role, parts)| json!({"role": role, "parts": parts})).collect()),
    );
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({"parts": system}));
    }
    let mut config = Map::new();
    for (from, to) in [
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("top_k", "topK"),
        ("seed", "seed"),
        ("n", "candidateCount"),
    ] {
        if let Some(v) = unified.get(from) {
            config.insert(to.into(), v.clone());
        }
    }
    if let Some(n) = max_tokens(unified) {
        config.insert("maxOutputTokens".into(), json!(n));
    }
    if let Some(stop) = stop_sequences(unified) {
        config.insert("stopSequences".into(), json!(stop));
    }
    if unified.get("disable_thinking").and_then(Value::as_bool) == Some(true) {
        config.insert("thinkingConfig".into(), json!({"thinkingBudget": 0}));
    } else if let Some(budget) = thinking_budget(unified) {
        config.insert("thinkingConfig".into(), json!({"thinkingBudget": budget, "includeThoughts": true}));
    }
    if unified.get("response_format").is_some_and(|f| f["type"] == "json_object") {
        config.insert("responseMimeType".into(), json!("application/json"));
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    if let Some(tools) = unified.get("tools").and_then(Value::as_array) {
        let declarations: Vec<Value> = tools
            .iter()
            .filter_map(|t| t.get("function"))
            .map(|f| {
                let mut d = json!({"name": f["name"]});
                if let Some(desc) = f.get("description") {
                    d["description"] = desc.clone();
                }
                if let Some(p) = f.get("parameters") {
                    d["parameters"] = p.clone();
                }
                d
            })
            .collect();
        body.insert("tools".into(), json!([{"functionDeclarations": declarations}]));
    }
    if let Some(choice) = unified.get("tool_choice") {
        let config = match choice {
            Value::String(s) if s == "none" => json!({"mode": "NONE"}),
            Value::String(s) if s == "required" => json!({"mode": "ANY"}),
            Value::Object(o) => {
                json!({"mode": "ANY", "allowedFunctionNames": [o.get("function").and_then(|f| f.get("name"))]})
            }
            _ => json!({"mode": "AUTO"}),
        };
        body.insert("toolConfig".into(), json!({"functionCallingConfig": config}));
    }
    Ok(Value::Object(body))
}

fn user_parts(content: &Value) -> Result<Vec<Value>, AdapterError> {
    match content {
        Value::String(text) => Ok(vec![json!({"text": text})]),
        Value::Array(parts) => parts
            .iter()
            .map(|part| match part["type"].as_str() {
                Some("text") => Ok(json!({"text": part["text"]})),
                Some("image_url") => {
                    let url = part["image_url"]["url"].as_str().unwrap_or_default();
                    match parse_data_url(url) {
                        Some((mime, data)) => Ok(json!({"inline_data": {"mime_type": mime, "data": data}})),
                        // Gemini fetches only its own storage (gs://, uploaded files), not arbitrary URLs.
                        None if url.starts_with("gs://") || url.contains("generativelanguage.googleapis.com/") => {
                            Ok(json!({"file_data": {"file_uri": url}}))
                        }
                        None => Err(adapter_error(
                            ErrorKind::Unsupported,
                            "Gemini takes images as data: URLs or gs:// file URIs",
                        )),
                    }
                }
                other => Err(adapter_error(
                    ErrorKind::Unsupported,
                    &format!("content part {other:?} is not supported by Gemini"),
                )),
            })
            .collect(),
        _ => Ok(vec![]),
    }
}
