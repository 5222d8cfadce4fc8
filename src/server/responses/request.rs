//! OpenAI Responses request → unified request: `instructions` and system/developer items to
//! system messages, input items to chat messages, function calls and their outputs to
//! `tool_calls` and tool messages, flat function tools to chat tools; built-in tools dropped.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value, json};

use crate::server::error::ApiError;
use crate::server::request::Checked;

/// The fields type-checked before translating, on the parsed body (`tools` only in shape:
/// nothing large is copied; the translation reads the JSON value).
#[derive(Debug, Deserialize)]
pub struct ResponsesRequest<'a> {
    #[serde(borrow)]
    pub model: crate::server::request::ModelName<'a>,
    #[serde(default)]
    pub stream: bool,
    pub previous_response_id: Option<String>,
    pub store: Option<bool>,
    #[serde(rename = "instructions")]
    _instructions: Option<Checked<String>>,
    #[serde(rename = "max_output_tokens")]
    _max_output_tokens: Option<Checked<u64>>,
    #[serde(rename = "temperature")]
    _temperature: Option<Checked<f64>>,
    #[serde(rename = "top_p")]
    _top_p: Option<Checked<f64>>,
    #[serde(rename = "tools")]
    _tools: Option<Checked<Vec<IgnoredAny>>>,
    #[serde(rename = "parallel_tool_calls")]
    _parallel_tool_calls: Option<Checked<bool>>,
}

/// What the door keeps of the checked fields once the body is changed (a replayed history).
pub struct Kept {
    pub model: String,
    pub stream: bool,
    pub previous_response_id: Option<String>,
    pub store: Option<bool>,
}

impl From<ResponsesRequest<'_>> for Kept {
    fn from(r: ResponsesRequest<'_>) -> Kept {
        Kept {
            model: r.model.into_owned(),
            stream: r.stream,
            previous_response_id: r.previous_response_id,
            store: r.store,
        }
    }
}

/// What the translation left out, for the log (Codex sends built-in tools on every request).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub tools: Vec<String>,
    pub items: Vec<String>,
}

/// Function tools inside `namespace` tools, flattened for chat upstreams (which have no
/// namespaces) as `{namespace}__{name}`, and split again in the answer. A top-level function
/// of the same flat name wins: its calls stay as they are.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Namespaces(Vec<(String, String, String)>);

impl Namespaces {
    pub fn of(request: &Map<String, Value>) -> Namespaces {
        let tools = request.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let top: Vec<&str> =
            tools.iter().filter(|t| t["type"] == "function").filter_map(|t| t["name"].as_str()).collect();
        let mut out = Vec::new();
        for namespace in tools.iter().filter(|t| t["type"] == "namespace") {
            let Some(ns) = namespace["name"].as_str() else { continue };
            for inner in namespace["tools"].as_array().into_iter().flatten().filter(|t| t["type"] == "function") {
                let Some(name) = inner["name"].as_str() else { continue };
                let flat = flat_name(ns, name);
                if !top.contains(&flat.as_str()) {
                    out.push((flat, ns.to_string(), name.to_string()));
                }
            }
        }
        Namespaces(out)
    }

    /// (namespace, name) of a flattened name the request declared.
    pub fn split(&self, flat: &str) -> Option<(&str, &str)> {
        self.0.iter().find(|(f, _, _)| f == flat).map(|(_, ns, name)| (ns.as_str(), name.as_str()))
    }
}

fn flat_name(namespace: &str, name: &str) -> String {
    format!("{namespace}__{name}")
}

/// The name a chat upstream knows a function by: flattened when it lives in a namespace.
fn called_name(item: &Value) -> Value {
    match (item.get("namespace").and_then(Value::as_str), item["name"].as_str()) {
        (Some(ns), Some(name)) => json!(flat_name(ns, name)),
        _ => item["name"].clone(),
    }
}

/// A Responses function tool (top level or inside a namespace, under `name`) as a chat tool.
fn chat_tool(tool: &Value, name: Value) -> Value {
    let parameters =
        tool.get("parameters").filter(|p| !p.is_null()).cloned().unwrap_or_else(|| json!({"type": "object"}));
    let mut function = json!({"name": name, "parameters": parameters});
    for field in ["description", "strict"] {
        if let Some(v) = tool.get(field).filter(|v| !v.is_null()) {
            function[field] = v.clone();
        }
    }
    json!({"type": "function", "function": function})
}

/// The request's `input` as items: a string is one user message.
pub fn input_items(request: &Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    match request.get("input") {
        Some(Value::String(text)) => Ok(vec![json!({"type": "message", "role": "user", "content": text})]),
        Some(Value::Array(items)) => Ok(items.clone()),
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(_) => Err(ApiError::invalid_request("input must be a string or an array of items").param("input")),
    }
}

/// Translates a checked Responses request (as JSON) into the unified form.
pub fn to_unified(request: &Map<String, Value>) -> Result<(Value, Dropped), ApiError> {
    let mut dropped = Dropped::default();
    let mut messages: Vec<Value> = Vec::new();
    if let Some(instructions) = request.get("instructions").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    match request.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                input_item(item, &mut messages, &mut dropped).map_err(|e| e.param(format!("input[{i}]")))?;
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err(ApiError::invalid_request("input must be a string or an array of items").param("input")),
    }
    if messages.iter().all(|m| m["role"] == "system") {
        return Err(ApiError::invalid_request("input: at least one message is required").param("input"));
    }

    let mut out = Map::new();
    out.insert("model".into(), request["model"].clone());
    out.insert("messages".into(), Value::Array(messages));
    for (from, to) in [
        ("max_output_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("parallel_tool_calls", "parallel_tool_calls"),
        ("prompt_cache_key", "prompt_cache_key"),
        ("user", "user"),
        ("safety_identifier", "safety_identifier"),
    ] {
        if let Some(v) = request.get(from).filter(|v| !v.is_null()) {
            out.insert(to.into(), v.clone());
        }
    }
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream".into(), json!(true));
        // response.completed reports usage, so the unified stream must carry it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(effort) = request.get("reasoning").and_then(|r| r.get("effort")).and_then(Value::as_str) {
        out.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(format) = request.get("text").and_then(|t| t.get("format")) {
        match format["type"].as_str() {
            Some("json_schema") => {
                let mut schema = json!({"name": format["name"], "schema": format["schema"]});
                for field in ["strict", "description"] {
                    if let Some(v) = format.get(field) {
                        schema[field] = v.clone();
                    }
                }
                out.insert("response_format".into(), json!({"type": "json_schema", "json_schema": schema}));
            }
            Some("json_object") => {
                out.insert("response_format".into(), json!({"type": "json_object"}));
            }
            _ => {}
        }
    }
    let mut tools = Vec::new();
    for tool in request.get("tools").and_then(Value::as_array).into_iter().flatten() {
        match tool["type"].as_str() {
            Some("function") => tools.push(chat_tool(tool, tool["name"].clone())),
            // Chat upstreams have no namespaces: each function in one becomes a flat function.
            Some("namespace") => {
                let ns = tool["name"].as_str().unwrap_or_default();
                for inner in tool["tools"].as_array().into_iter().flatten() {
                    match (inner["type"].as_str(), inner["name"].as_str()) {
                        (Some("function"), Some(name)) if !ns.is_empty() => {
                            tools.push(chat_tool(inner, json!(flat_name(ns, name))))
                        }
                        (kind, _) => dropped
                            .tools
                            .push(format!("namespace {}", kind.unwrap_or("untyped")).chars().take(40).collect()),
                    }
                }
            }
            other => dropped.tools.push(other.unwrap_or("untyped").chars().take(40).collect()),
        }
    }
    // A built-in tool the client requires (`tool_choice` naming it, or `required` with no
    // function left) cannot be served by a chat upstream: no unified form, not a silent drop.
    let choice = request.get("tool_choice");
    let required_builtin = match choice {
        Some(Value::Object(c)) => {
            c.get("type").and_then(Value::as_str).filter(|t| !matches!(*t, "function" | "allowed_tools"))
        }
        Some(Value::String(mode)) if mode == "required" && tools.is_empty() => {
            dropped.tools.first().map(String::as_str)
        }
        _ => None,
    };
    if let Some(tool) = required_builtin {
        return Err(ApiError::invalid_request(format!(
            "tool_choice requires the built-in tool `{tool}`, which only an upstream speaking the Responses API has"
        ))
        .param("tool_choice"));
    }
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = choice {
            let unified = match choice {
                Value::String(mode) => json!(mode),
                Value::Object(_) if choice["type"] == "function" => {
                    json!({"type": "function", "function": {"name": called_name(choice)}})
                }
                _ => json!("auto"),
            };
            out.insert("tool_choice".into(), unified);
        }
    }
    Ok((Value::Object(out), dropped))
}

/// An input item's type; a bare `{role, content}` is a message too.
fn item_kind(item: &Value) -> &str {
    item["type"].as_str().unwrap_or(if item.get("role").is_some() { "message" } else { "" })
}

/// Whether the unified form carries `item` (what a translated turn stores of its input).
pub fn translated_item(item: &Value) -> bool {
    matches!(item_kind(item), "message" | "function_call" | "function_call_output")
}

/// One input item onto the unified messages.
fn input_item(item: &Value, messages: &mut Vec<Value>, dropped: &mut Dropped) -> Result<(), ApiError> {
    match item_kind(item) {
        "message" => {
            let role = match item["role"].as_str() {
                Some("user") => "user",
                Some("assistant") => "assistant",
                Some("system" | "developer") => "system",
                _ => return Err(ApiError::invalid_request("role must be user, assistant, system or developer")),
            };
            let content = message_content(&item["content"], role)?;
            messages.push(json!({"role": role, "content": content}));
        }
        "function_call" => {
            let call = json!({"id": item["call_id"], "type": "function",
                              "function": {"name": called_name(item), "arguments": item["arguments"].as_str().unwrap_or("{}")}});
            // Parallel calls follow each other: one assistant turn holds them all.
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" && last.get("tool_calls").is_some() => {
                    last["tool_calls"].as_array_mut().expect("an array").push(call);
                }
                Some(last) if last["role"] == "assistant" => {
                    last["tool_calls"] = json!([call]);
                }
                _ => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
        }
        "function_call_output" => {
            let output = match &item["output"] {
                Value::String(text) => text.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
                other => other.to_string(),
            };
            messages.push(json!({"role": "tool", "tool_call_id": item["call_id"], "content": output}));
        }
        // Reasoning from an earlier turn: its summary is all a chat upstream could use, and
        // chat upstreams take no reasoning input; encrypted content is for OpenAI alone.
        other => dropped.items.push(if other.is_empty() { "untyped".into() } else { other.chars().take(40).collect() }),
    }
    Ok(())
}

/// A message's content: a string, or parts (`input_text`, `output_text`, `input_image`).
fn message_content(content: &Value, role: &str) -> Result<Value, ApiError> {
    let parts = match content {
        Value::String(text) => return Ok(json!(text)),
        Value::Array(parts) => parts,
        _ => return Err(ApiError::invalid_request("content must be a string or an array of parts")),
    };
    let mut out = Vec::new();
    for part in parts {
        match part["type"].as_str() {
            Some("input_text" | "output_text" | "text") => out.push(json!({"type": "text", "text": part["text"]})),
            Some("refusal") => out.push(json!({"type": "text", "text": part["refusal"]})),
            Some("input_image") => match part["image_url"].as_str() {
                Some(url) => out.push(json!({"type": "image_url", "image_url": {"url": url, "detail": part.get("detail").cloned().unwrap_or(json!("auto"))}})),
                None => return Err(ApiError::invalid_request("input_image needs an image_url (file ids are not kept here)")),
            },
            Some(other) => {
                return Err(ApiError::invalid_request(format!("content part type `{other}` is not supported")));
            }
            None => return Err(ApiError::invalid_request("every content part needs a `type`")),
        }
    }
    // Chat upstreams take plain text for assistant and system turns.
    if role != "user" {
        let text: Vec<&str> = out.iter().filter_map(|p| p["text"].as_str()).collect();
        return Ok(json!(text.join("")));
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unified(request: Value) -> (Value, Dropped) {
        to_unified(request.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_codex_shaped_request_becomes_a_chat_request() {
        let (out, dropped) = unified(json!({
            "model": "gpt-5", "instructions": "You are Codex.", "stream": true, "store": false,
            "reasoning": {"effort": "high", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "conv-1", "parallel_tool_calls": false, "tool_choice": "auto",
            "tools": [
                {"type": "function", "name": "shell", "description": "Run a command", "strict": false,
                 "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}},
                {"type": "web_search"},
            ],
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: read-only."}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files"}]},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
                {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}"},
                {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": "{\"command\":[\"pwd\"]}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
                {"type": "function_call_output", "call_id": "call_2", "output": "/work"},
            ],
        }));
        assert_eq!(
            out["messages"],
            json!([
                {"role": "system", "content": "You are Codex."},
                {"role": "system", "content": "Sandbox: read-only."},
                {"role": "user", "content": [{"type": "text", "text": "List files"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":[\"ls\"]}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":[\"pwd\"]}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
                {"role": "tool", "tool_call_id": "call_2", "content": "/work"},
            ])
        );
        assert_eq!(out["tools"].as_array().unwrap().len(), 1);
        assert_eq!(out["tools"][0]["function"]["name"], "shell");
        assert_eq!(out["tools"][0]["function"]["strict"], false);
        assert_eq!(
            (out["reasoning_effort"].as_str(), out["prompt_cache_key"].as_str()),
            (Some("high"), Some("conv-1"))
        );
        assert_eq!(out["parallel_tool_calls"], false);
        assert_eq!(out["stream_options"], json!({"include_usage": true}));
        assert_eq!(dropped, Dropped { tools: vec!["web_search".into()], items: vec!["reasoning".into()] });
    }

    #[test]
    fn functions_in_a_namespace_become_flat_functions_and_their_calls_flat_names() {
        let request = json!({"model": "m", "tool_choice": {"type": "function", "namespace": "mcp__files", "name": "read"},
        "tools": [
            {"type": "namespace", "name": "mcp__files", "description": "Files", "tools": [
                {"type": "function", "name": "read", "description": "Reads", "parameters": {"type": "object"}},
                {"type": "function", "name": "list"},
                {"type": "custom", "name": "grep"}]},
            {"type": "function", "name": "mcp__files__list", "parameters": {"type": "object", "properties": {}}},
        ],
        "input": [
            {"role": "user", "content": "read a.txt"},
            {"type": "function_call", "call_id": "c1", "namespace": "mcp__files", "name": "read", "arguments": "{}"},
        ]});
        let (out, dropped) = unified(request.clone());
        let names: Vec<&str> =
            out["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["mcp__files__read", "mcp__files__list", "mcp__files__list"]);
        assert_eq!(out["tools"][0]["function"]["description"], "Reads");
        assert_eq!(out["tool_choice"], json!({"type": "function", "function": {"name": "mcp__files__read"}}));
        assert_eq!(out["messages"][1]["tool_calls"][0]["function"]["name"], "mcp__files__read");
        assert_eq!(dropped.tools, ["namespace custom"]);
        let namespaces = Namespaces::of(request.as_object().unwrap());
        assert_eq!(namespaces.split("mcp__files__read"), Some(("mcp__files", "read")));
        assert_eq!(namespaces.split("mcp__files__list"), None, "the top-level function of that name wins");
        assert_eq!(namespaces.split("shell"), None);
    }

    #[test]
    fn strings_formats_and_refusals() {
        let (out, _) = unified(json!({"model": "m", "input": "Hi", "max_output_tokens": 50,
            "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}, "strict": true}}}));
        assert_eq!(out["messages"], json!([{"role": "user", "content": "Hi"}]));
        assert_eq!(out["max_tokens"], 50);
        assert_eq!(
            out["response_format"]["json_schema"],
            json!({"name": "r", "schema": {"type": "object"}, "strict": true})
        );
        let refused = |request: Value| to_unified(request.as_object().unwrap()).unwrap_err();
        assert_eq!(refused(json!({"model": "m", "instructions": "x"})).param.as_deref(), Some("input"));
        let e = refused(json!({"model": "m", "input": [{"role": "robot", "content": "x"}]}));
        assert_eq!(e.param.as_deref(), Some("input[0]"));
        let e = refused(
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}),
        );
        assert!(e.message.contains("input_file"), "{}", e.message);
        let e = refused(
            json!({"model": "m", "input": "x", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}}),
        );
        assert!(e.message.contains("`web_search`"), "{}", e.message);
        let e =
            refused(json!({"model": "m", "input": "x", "tools": [{"type": "web_search"}], "tool_choice": "required"}));
        assert_eq!(e.param.as_deref(), Some("tool_choice"));
    }
}
