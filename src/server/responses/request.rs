//! OpenAI Responses request → unified request: `instructions` and system/developer items to
//! system messages, input items to chat messages, function calls and their outputs to
//! `tool_calls` and tool messages, flat function tools to chat tools; built-in tools dropped.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Number, Value, json};

use crate::server::error::ApiError;
use crate::server::request::{Lenient, ModelName, null_is_default};

/// A Responses request as the gateway reads it: every field the translation reads, named and
/// typed, read (borrowing) from the parsed body. The body itself stays, for what goes as sent
/// to a Responses upstream, what the answer echoes and what a stored turn keeps.
#[derive(Debug, Deserialize)]
pub struct ResponsesRequest<'a> {
    #[serde(borrow)]
    pub model: ModelName<'a>,
    #[serde(borrow, default)]
    pub instructions: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub input: Input<'a>,
    #[serde(default)]
    pub stream: bool,
    pub previous_response_id: Option<String>,
    pub store: Option<bool>,
    pub max_output_tokens: Option<u64>,
    /// Numbers as written (`1` stays `1`, not `1.0`).
    pub temperature: Option<Number>,
    pub top_p: Option<Number>,
    pub parallel_tool_calls: Option<bool>,
    #[serde(borrow, default)]
    pub prompt_cache_key: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub user: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub safety_identifier: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub reasoning: Option<Reasoning<'a>>,
    #[serde(default)]
    pub text: Option<TextConfig>,
    #[serde(borrow, default, deserialize_with = "null_is_default")]
    pub tools: Vec<Tool<'a>>,
    /// A choice the gateway cannot read (an object without `type`) reads as none was given.
    #[serde(borrow, default)]
    pub tool_choice: Lenient<ToolChoice<'a>>,
}

/// `input`: one user message as a string, or items.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged, expecting = "a string or an array of items")]
pub enum Input<'a> {
    #[default]
    None,
    Text(#[serde(borrow)] Cow<'a, str>),
    /// An item the gateway cannot read (not an object, a field of the wrong type) is passed
    /// over by the translation as untyped; it still goes as sent to a Responses upstream.
    Items(#[serde(borrow)] Vec<Lenient<Item<'a>>>),
}

/// One input item, read flat: an item type the unified form cannot carry (reasoning, built-in
/// tool calls) keeps its name for the log instead of failing the parse.
#[derive(Debug, Deserialize)]
pub struct Item<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub content: Parts<'a>,
    #[serde(borrow, default)]
    pub call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub arguments: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub output: Parts<'a>,
}

impl Item<'_> {
    /// The item's type; a bare `{role, content}` is a message too.
    fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or(if self.role.is_some() { "message" } else { "" })
    }

    /// The name a chat upstream knows a function by: flattened when it lives in a namespace.
    fn called_name(&self) -> Option<String> {
        called_name(self.namespace.as_deref(), self.name.as_deref())
    }
}

/// A message's `content` or a call's `output`: text, or parts; any other shape is kept as
/// written (an output becomes its JSON text).
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
pub enum Parts<'a> {
    #[default]
    Absent,
    Text(#[serde(borrow)] Cow<'a, str>),
    List(#[serde(borrow)] Vec<Part<'a>>),
    Other(Value),
}

#[derive(Debug, Deserialize)]
pub struct Part<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub refusal: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub image_url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub detail: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
pub struct Reasoning<'a> {
    #[serde(borrow, default)]
    pub effort: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
pub struct TextConfig {
    pub format: Option<Format>,
}

/// `text.format`: `json_schema` (with its schema, passed on as written), `json_object`, `text`.
#[derive(Debug, Deserialize)]
pub struct Format {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub name: Option<Value>,
    pub schema: Option<Value>,
    pub strict: Option<Value>,
    pub description: Option<Value>,
}

/// A tool, read flat: `function`, a `namespace` of tools, or a built-in kept by its type.
#[derive(Debug, Deserialize)]
pub struct Tool<'a> {
    #[serde(rename = "type", borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    pub description: Option<Value>,
    pub strict: Option<Value>,
    /// The JSON Schema, passed on as written.
    pub parameters: Option<Value>,
    /// A namespace's own tools.
    #[serde(borrow, default, deserialize_with = "null_is_default")]
    pub tools: Vec<Tool<'a>>,
}

/// `tool_choice`: a mode (`auto`, `required`, `none`) or a tool named by its type.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a mode or a tool")]
pub enum ToolChoice<'a> {
    Mode(#[serde(borrow)] Cow<'a, str>),
    Tool {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow, default)]
        name: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        namespace: Option<Cow<'a, str>>,
    },
}

/// What the door keeps of the request once the body is changed (a replayed history).
pub struct Kept {
    pub model: String,
    pub stream: bool,
    pub previous_response_id: Option<String>,
    pub store: Option<bool>,
}

impl From<&ResponsesRequest<'_>> for Kept {
    fn from(r: &ResponsesRequest<'_>) -> Kept {
        Kept {
            model: r.model.to_string(),
            stream: r.stream,
            previous_response_id: r.previous_response_id.clone(),
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
    pub fn of(request: &ResponsesRequest<'_>) -> Namespaces {
        let is_function = |t: &&Tool<'_>| t.kind.as_deref() == Some("function");
        // A set: a body may declare half a million of each.
        let top: std::collections::HashSet<&str> =
            request.tools.iter().filter(is_function).filter_map(|t| t.name.as_deref()).collect();
        let mut out = Vec::new();
        for namespace in request.tools.iter().filter(|t| t.kind.as_deref() == Some("namespace")) {
            let Some(ns) = namespace.name.as_deref() else { continue };
            for inner in namespace.tools.iter().filter(is_function) {
                let Some(name) = inner.name.as_deref() else { continue };
                let flat = flat_name(ns, name);
                if !top.contains(flat.as_str()) {
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
fn called_name(namespace: Option<&str>, name: Option<&str>) -> Option<String> {
    match (namespace, name) {
        (Some(ns), Some(name)) => Some(flat_name(ns, name)),
        (_, name) => name.map(str::to_string),
    }
}

/// A Responses function tool (top level or inside a namespace, under `name`) as a chat tool.
fn chat_tool(tool: &Tool<'_>, name: &str) -> Value {
    let parameters = tool.parameters.clone().filter(|p| !p.is_null()).unwrap_or_else(|| json!({"type": "object"}));
    let mut function = json!({"name": name, "parameters": parameters});
    for (field, value) in [("description", &tool.description), ("strict", &tool.strict)] {
        if let Some(v) = value.as_ref().filter(|v| !v.is_null()) {
            function[field] = v.clone();
        }
    }
    json!({"type": "function", "function": function})
}

/// The request's `input` as items, as the client wrote them (what a stored turn keeps): a
/// string is one user message.
pub fn input_items(request: &Map<String, Value>) -> Vec<Value> {
    match request.get("input") {
        Some(Value::String(text)) => vec![json!({"type": "message", "role": "user", "content": text})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

/// Translates a checked Responses request into the unified form.
pub fn to_unified(request: &ResponsesRequest<'_>) -> Result<(Value, Dropped), ApiError> {
    let mut dropped = Dropped::default();
    let mut messages: Vec<Value> = Vec::new();
    if let Some(instructions) = request.instructions.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    match &request.input {
        Input::Text(text) => messages.push(json!({"role": "user", "content": text})),
        Input::Items(items) => {
            for (i, item) in items.iter().enumerate() {
                let Some(item) = &item.0 else {
                    dropped.items.push("untyped".into());
                    continue;
                };
                input_item(item, &mut messages, &mut dropped).map_err(|e| e.param(format!("input[{i}]")))?;
            }
        }
        Input::None => {}
    }
    if messages.iter().all(|m| m["role"] == "system") {
        return Err(ApiError::invalid_request("input: at least one message is required").param("input"));
    }

    let mut out = Map::new();
    out.insert("model".into(), json!(&*request.model));
    out.insert("messages".into(), Value::Array(messages));
    if let Some(max) = request.max_output_tokens {
        out.insert("max_tokens".into(), json!(max));
    }
    for (name, number) in [("temperature", &request.temperature), ("top_p", &request.top_p)] {
        if let Some(number) = number {
            out.insert(name.into(), Value::Number(number.clone()));
        }
    }
    if let Some(parallel) = request.parallel_tool_calls {
        out.insert("parallel_tool_calls".into(), json!(parallel));
    }
    for (name, text) in [
        ("prompt_cache_key", &request.prompt_cache_key),
        ("user", &request.user),
        ("safety_identifier", &request.safety_identifier),
    ] {
        if let Some(text) = text {
            out.insert(name.into(), json!(text));
        }
    }
    if request.stream {
        out.insert("stream".into(), json!(true));
        // response.completed reports usage, so the unified stream must carry it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(effort) = request.reasoning.as_ref().and_then(|r| r.effort.as_deref()) {
        out.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(format) = request.text.as_ref().and_then(|t| t.format.as_ref()) {
        match format.kind.as_deref() {
            Some("json_schema") => {
                let mut schema = json!({"name": format.name, "schema": format.schema});
                for (field, value) in [("strict", &format.strict), ("description", &format.description)] {
                    if let Some(v) = value {
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
    for tool in &request.tools {
        match (tool.kind.as_deref(), tool.name.as_deref()) {
            (Some("function"), name) => tools.push(chat_tool(tool, name.unwrap_or_default())),
            // Chat upstreams have no namespaces: each function in one becomes a flat function.
            (Some("namespace"), ns) => {
                let ns = ns.unwrap_or_default();
                for inner in &tool.tools {
                    match (inner.kind.as_deref(), inner.name.as_deref()) {
                        (Some("function"), Some(name)) if !ns.is_empty() => {
                            tools.push(chat_tool(inner, &flat_name(ns, name)))
                        }
                        (kind, _) => dropped
                            .tools
                            .push(format!("namespace {}", kind.unwrap_or("untyped")).chars().take(40).collect()),
                    }
                }
            }
            (other, _) => dropped.tools.push(other.unwrap_or("untyped").chars().take(40).collect()),
        }
    }
    // A built-in tool the client requires (`tool_choice` naming it, or `required` with no
    // function left) cannot be served by a chat upstream: no unified form, not a silent drop.
    let required_builtin = match &request.tool_choice.0 {
        Some(ToolChoice::Tool { kind, .. }) if !matches!(kind.as_ref(), "function" | "allowed_tools") => {
            Some(kind.as_ref())
        }
        Some(ToolChoice::Mode(mode)) if mode == "required" && tools.is_empty() => {
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
        if let Some(choice) = &request.tool_choice.0 {
            let unified = match choice {
                ToolChoice::Mode(mode) => json!(mode),
                ToolChoice::Tool { kind, name, namespace } if kind == "function" => {
                    json!({"type": "function", "function": {"name": called_name(namespace.as_deref(), name.as_deref())}})
                }
                ToolChoice::Tool { .. } => json!("auto"),
            };
            out.insert("tool_choice".into(), unified);
        }
    }
    Ok((Value::Object(out), dropped))
}

/// Whether the unified form carries `item`, as stored (what a translated turn stores of its input).
pub fn translated_item(item: &Value) -> bool {
    Item::deserialize(item)
        .is_ok_and(|item| matches!(item.kind(), "message" | "function_call" | "function_call_output"))
}

/// One input item onto the unified messages.
fn input_item(item: &Item<'_>, messages: &mut Vec<Value>, dropped: &mut Dropped) -> Result<(), ApiError> {
    match item.kind() {
        "message" => {
            let role = match item.role.as_deref() {
                Some("user") => "user",
                Some("assistant") => "assistant",
                Some("system" | "developer") => "system",
                _ => return Err(ApiError::invalid_request("role must be user, assistant, system or developer")),
            };
            let content = message_content(&item.content, role)?;
            messages.push(json!({"role": role, "content": content}));
        }
        "function_call" => {
            let call = json!({"id": item.call_id, "type": "function",
                              "function": {"name": item.called_name(), "arguments": item.arguments.as_deref().unwrap_or("{}")}});
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
            let output = match &item.output {
                Parts::Text(text) => text.to_string(),
                Parts::List(parts) => parts.iter().filter_map(|p| p.text.as_deref()).collect::<Vec<_>>().join("\n"),
                Parts::Other(other) => other.to_string(),
                Parts::Absent => "null".to_string(),
            };
            messages.push(json!({"role": "tool", "tool_call_id": item.call_id, "content": output}));
        }
        // Reasoning from an earlier turn: its summary is all a chat upstream could use, and
        // chat upstreams take no reasoning input; encrypted content is for OpenAI alone.
        other => dropped.items.push(if other.is_empty() { "untyped".into() } else { other.chars().take(40).collect() }),
    }
    Ok(())
}

/// A message's content: a string, or parts (`input_text`, `output_text`, `input_image`).
fn message_content(content: &Parts<'_>, role: &str) -> Result<Value, ApiError> {
    let parts = match content {
        Parts::Text(text) => return Ok(json!(text)),
        Parts::List(parts) => parts,
        Parts::Other(_) | Parts::Absent => {
            return Err(ApiError::invalid_request("content must be a string or an array of parts"));
        }
    };
    let mut out = Vec::new();
    for part in parts {
        match part.kind.as_deref() {
            Some("input_text" | "output_text" | "text") => out.push(json!({"type": "text", "text": part.text})),
            Some("refusal") => out.push(json!({"type": "text", "text": part.refusal})),
            Some("input_image") => match part.image_url.as_deref() {
                Some(url) => out.push(json!({"type": "image_url", "image_url": {"url": url, "detail": part.detail.as_deref().unwrap_or("auto")}})),
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

    fn checked(request: &Value) -> ResponsesRequest<'_> {
        ResponsesRequest::deserialize(request).unwrap()
    }

    fn unified(request: Value) -> (Value, Dropped) {
        to_unified(&checked(&request)).unwrap()
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
        let namespaces = Namespaces::of(&checked(&request));
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
        let refused = |request: Value| to_unified(&checked(&request)).unwrap_err();
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
