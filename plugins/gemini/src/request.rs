//! Unified request → `GenerateContentRequest`: system prompt to `systemInstruction`, turns to
//! `contents` (assistant = `model`), tool calls and results to `functionCall` /
//! `functionResponse` parts, sampling and thinking to `generationConfig`.

use std::collections::HashMap;

use adapter_kit::errors::adapter_error;
use adapter_kit::unified::{ChatRequest, Content, Part, Role, ToolChoice, parse_data_url};
use adapter_kit::{AdapterError, ErrorKind};
use serde_json::{Map, Value, json};

pub fn to_generate_content(unified: &ChatRequest) -> Result<Value, AdapterError> {
    let mut system = Vec::new();
    let mut contents: Vec<(&str, Vec<Value>)> = Vec::new();
    // functionResponse needs the function's name; tool messages only carry the call id.
    let mut call_names: HashMap<&str, &str> = HashMap::new();
    for message in unified.messages() {
        let (role, parts) = match message.role {
            Role::System | Role::Developer => {
                system.push(json!({"text": message.content.text()}));
                continue;
            }
            Role::Assistant => {
                let mut parts = Vec::new();
                let text = message.content.text();
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for call in &message.tool_calls {
                    let name = call.function.name.as_deref().unwrap_or_default();
                    call_names.insert(call.id.as_deref().unwrap_or_default(), name);
                    let args: Value =
                        serde_json::from_str(call.function.arguments.as_deref().unwrap_or("{}")).unwrap_or(json!({}));
                    parts.push(json!({"functionCall": {"name": name, "args": args}}));
                }
                ("model", parts)
            }
            Role::Tool | Role::Function => {
                let id = message.tool_call_id.as_deref().unwrap_or_default();
                let name = call_names.get(id).copied().or(message.name.as_deref()).unwrap_or_default();
                let text = message.content.text();
                let response = serde_json::from_str::<Value>(&text)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({"result": text}));
                ("user", vec![json!({"functionResponse": {"name": name, "response": response}})])
            }
            _ => ("user", user_parts(&message.content)?),
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(parts),
            _ => contents.push((role, parts)),
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
    for (value, to) in [
        (&unified.temperature, "temperature"),
        (&unified.top_p, "topP"),
        (&unified.top_k, "topK"),
        (&unified.seed, "seed"),
        (&unified.n, "candidateCount"),
    ] {
        if let Some(value) = value {
            config.insert(to.into(), value.clone());
        }
    }
    if let Some(n) = unified.max_tokens() {
        config.insert("maxOutputTokens".into(), json!(n));
    }
    if let Some(stop) = &unified.stop {
        config.insert("stopSequences".into(), json!(stop));
    }
    if unified.thinking_off() {
        config.insert("thinkingConfig".into(), json!({"thinkingBudget": 0}));
    } else if let Some(budget) = unified.thinking_budget() {
        config.insert("thinkingConfig".into(), json!({"thinkingBudget": budget, "includeThoughts": true}));
    }
    if unified.wants_json_object() {
        config.insert("responseMimeType".into(), json!("application/json"));
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    if let Some(tools) = &unified.tools {
        let declarations: Vec<Value> = tools
            .iter()
            .filter_map(|t| t.function.as_ref())
            .map(|f| {
                let mut d = json!({"name": f.name});
                if let Some(description) = &f.description {
                    d["description"] = description.clone();
                }
                if let Some(parameters) = &f.parameters {
                    d["parameters"] = parameters.clone();
                }
                d
            })
            .collect();
        body.insert("tools".into(), json!([{"functionDeclarations": declarations}]));
    }
    if let Some(choice) = &unified.tool_choice {
        let config = match choice {
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::Function(Some(name)) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
            // A choice naming no function (`allowed_tools`, a custom tool): any of them.
            ToolChoice::Function(None) => json!({"mode": "ANY"}),
            ToolChoice::Auto | ToolChoice::Unknown(_) => json!({"mode": "AUTO"}),
        };
        body.insert("toolConfig".into(), json!({"functionCallingConfig": config}));
    }
    Ok(Value::Object(body))
}

fn user_parts(content: &Content) -> Result<Vec<Value>, AdapterError> {
    match content {
        Content::Text(text) => Ok(vec![json!({"text": text})]),
        Content::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                Part::Text(text) => Ok(json!({"text": text})),
                Part::ImageUrl { url, .. } => match parse_data_url(url) {
                    Some((mime, data)) => Ok(json!({"inline_data": {"mime_type": mime, "data": data}})),
                    // Gemini fetches only its own storage (gs://, uploaded files), not arbitrary URLs.
                    None if url.starts_with("gs://") || url.contains("generativelanguage.googleapis.com/") => {
                        Ok(json!({"file_data": {"file_uri": url}}))
                    }
                    None => Err(adapter_error(
                        ErrorKind::Unsupported,
                        "Gemini takes images as data: URLs or gs:// file URIs",
                    )),
                },
                Part::Other { kind, .. } => Err(adapter_error(
                    ErrorKind::Unsupported,
                    &format!("content part `{}` is not supported by Gemini", kind.as_deref().unwrap_or("untyped")),
                )),
            })
            .collect(),
        Content::Absent | Content::Other(_) => Ok(vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unified_chat_becomes_contents_with_function_parts_and_a_generation_config() {
        let unified = ChatRequest::parse(
            r#"{"max_completion_tokens":64,"top_p":0.9,"n":2,"stop":["x","y"],"response_format":{"type":"json_object"},
            "disable_thinking":true,"tool_choice":{"type":"function","function":{"name":"w"}},
            "tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object"}}}],
            "messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":"Weather?"},
              {"role":"assistant","content":null,"tool_calls":[{"id":"c1","function":{"name":"w","arguments":"{}"}}]},
              {"role":"tool","tool_call_id":"c1","content":"{\"sky\":\"clear\"}"},{"role":"tool","tool_call_id":"c9","name":"v","content":"plain"}]}"#,
        )
        .unwrap();
        let body = to_generate_content(&unified).unwrap();
        assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "Be terse."}]}));
        assert_eq!(
            body["contents"],
            json!([
                {"role": "user", "parts": [{"text": "Weather?"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "w", "args": {}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "w", "response": {"sky": "clear"}}},
                    {"functionResponse": {"name": "v", "response": {"result": "plain"}}},
                ]},
            ])
        );
        assert_eq!(
            body["generationConfig"],
            json!({"topP": 0.9, "candidateCount": 2, "maxOutputTokens": 64, "stopSequences": ["x", "y"],
                   "thinkingConfig": {"thinkingBudget": 0}, "responseMimeType": "application/json"})
        );
        assert_eq!(body["tools"], json!([{"functionDeclarations": [{"name": "w", "parameters": {"type": "object"}}]}]));
        assert_eq!(
            body["toolConfig"],
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["w"]}})
        );
        let url = ChatRequest::parse(
            r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}"#,
        )
        .unwrap();
        assert_eq!(to_generate_content(&url).unwrap_err().kind, ErrorKind::Unsupported);
        let unnamed = ChatRequest::parse(
            r#"{"messages":[{"role":"user","content":"Hi"}],"tool_choice":{"type":"allowed_tools","allowed_tools":{}}}"#,
        )
        .unwrap();
        assert_eq!(
            to_generate_content(&unnamed).unwrap()["toolConfig"],
            json!({"functionCallingConfig": {"mode": "ANY"}})
        );
    }
}
