//! Built-in `ollama` adapter: Ollama's native `/api/chat` (NDJSON streams, whole tool calls,
//! `thinking`, `think`), for local models. base_url is the server root, e.g.
//! `http://127.0.0.1:11434`.

use std::cell::RefCell;

use adapter_kit::errors::{adapter_error, upstream_error};
use adapter_kit::http::{join_url, setting_headers};
use adapter_kit::unified::{self, ChatRequest, ChunkBuilder, Part, Role, Usage, parse_data_url};
use adapter_kit::{
    AdapterError, ErrorKind, Guest, GuestSession, HttpRequest, HttpResponse, Metadata, Operation, SourceContext,
    StreamEvent, StreamFraming, StreamOutput, host, setting,
};
use serde_json::{Map, Value, json};

struct Ollama;

impl Guest for Ollama {
    type Session = Session;

    fn describe() -> Metadata {
        adapter_kit::metadata("ollama", "ollama-chat", StreamFraming::Ndjson)
    }
}

#[derive(Default)]
struct StreamState {
    include_usage: bool,
    started: bool,
    done: bool,
    tool_calls: usize,
    chunks: ChunkBuilder,
}

struct Session {
    ctx: SourceContext,
    stream: RefCell<StreamState>,
}

impl GuestSession for Session {
    fn new(ctx: SourceContext) -> Self {
        Session { ctx, stream: RefCell::new(StreamState::default()) }
    }

    fn transform_request(&self, request: String) -> Result<HttpRequest, AdapterError> {
        let mut state = self.stream.borrow_mut();
        let (body, default_path) = match self.ctx.operation {
            Operation::Chat => {
                let unified = adapter_kit::parse_chat(&request)?;
                state.include_usage = unified.wants_stream_usage();
                (to_chat(&unified, &self.ctx.upstream_model)?, "/api/chat")
            }
            Operation::Embedding => {
                let embeddings = adapter_kit::parse_embeddings(&request)?;
                (json!({"model": self.ctx.upstream_model, "input": embeddings.inputs()}), "/api/embed")
            }
            Operation::Image => {
                return Err(adapter_error(ErrorKind::Unsupported, "Ollama has no image generation API"));
            }
        };
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if !self.ctx.api_key.is_empty() {
            headers.push(("authorization".into(), format!("Bearer {}", self.ctx.api_key)));
        }
        headers.extend(setting_headers(&self.ctx.settings));
        Ok(HttpRequest {
            method: "POST".into(),
            url: join_url(&self.ctx.base_url, setting(&self.ctx, "path").unwrap_or(default_path)),
            headers,
            body: serde_json::to_vec(&body).expect("JSON serialises"),
        })
    }

    fn transform_response(&self, response: HttpResponse) -> Result<String, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        let value: Value = adapter_kit::parse_body(&response.body)?;
        if self.ctx.operation == Operation::Embedding {
            let vectors = value["embeddings"]
                .as_array()
                .cloned()
                .ok_or_else(|| adapter_error(ErrorKind::InvalidResponse, "upstream response has no `embeddings`"))?;
            return Ok(unified::embedding_list(&self.ctx.upstream_model, vectors, value["prompt_eval_count"].as_u64()));
        }
        let message = &value["message"];
        let mut out = json!({"role": "assistant", "content": message["content"].as_str().unwrap_or_default()});
        if let Some(thinking) = message["thinking"].as_str().filter(|t| !t.is_empty()) {
            out["reasoning_content"] = json!(thinking);
        }
        let calls = tool_calls(message, 0);
        let finish = if calls.is_empty() { finish_reason(&value) } else { "tool_calls" };
        if !calls.is_empty() {
            out["tool_calls"] = Value::Array(calls.into_iter().map(|(_, c)| c).collect());
        }
        Ok(unified::response(
            &format!("chatcmpl-ollama-{}", host::now_unix_ms()),
            value["model"].as_str().unwrap_or(&self.ctx.upstream_model),
            host::now_unix_ms() / 1000,
            out,
            Some(finish),
            Some(usage(&value)),
        ))
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<StreamOutput, AdapterError> {
        let value: Value = serde_json::from_str(&event.data)
            .map_err(|e| adapter_error(ErrorKind::InvalidResponse, &format!("stream line is not JSON: {e}")))?;
        if let Some(error) = value["error"].as_str() {
            return Err(adapter_error(ErrorKind::Server, error));
        }
        let mut st = self.stream.borrow_mut();
        let mut chunks = Vec::new();
        if !st.started {
            st.started = true;
            st.chunks = ChunkBuilder {
                id: format!("chatcmpl-ollama-{}", host::now_unix_ms()),
                model: value["model"].as_str().unwrap_or(&self.ctx.upstream_model).to_string(),
                created: host::now_unix_ms() / 1000,
            };
            chunks.push(st.chunks.chunk(json!({"role": "assistant", "content": ""}), None));
        }
        let message = &value["message"];
        if let Some(thinking) = message["thinking"].as_str().filter(|t| !t.is_empty()) {
            chunks.push(st.chunks.chunk(json!({"reasoning_content": thinking}), None));
        }
        if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
            chunks.push(st.chunks.chunk(json!({"content": text}), None));
        }
        // Ollama sends each tool call whole; give it the next OpenAI index.
        for (index, mut call) in tool_calls(message, st.tool_calls) {
            call["index"] = json!(index);
            chunks.push(st.chunks.chunk(json!({"tool_calls": [call]}), None));
            st.tool_calls = index + 1;
        }
        if value["done"] == true {
            st.done = true;
            let finish = if st.tool_calls > 0 { "tool_calls" } else { finish_reason(&value) };
            chunks.push(st.chunks.chunk(json!({}), Some(finish)));
            if st.include_usage {
                chunks.push(st.chunks.usage_chunk(usage(&value).to_json()));
            }
        }
        Ok(StreamOutput { chunks, done: st.done })
    }

    fn finish_stream(&self) -> Result<StreamOutput, AdapterError> {
        adapter_kit::stream_end(self.stream.borrow().done, "a line with \"done\": true")
    }
}

fn finish_reason(value: &Value) -> &'static str {
    match value["done_reason"].as_str() {
        Some("length") => "length",
        _ => "stop",
    }
}

fn usage(value: &Value) -> Usage {
    Usage {
        prompt: value["prompt_eval_count"].as_u64(),
        completion: value["eval_count"].as_u64(),
        ..Default::default()
    }
}

/// Ollama tool calls (arguments as an object) → unified ones (arguments as a JSON string).
fn tool_calls(message: &Value, first_index: usize) -> Vec<(usize, Value)> {
    message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, call)| {
            let index = first_index + i;
            let function = &call["function"];
            let arguments = match &function["arguments"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let id = call["id"].as_str().map(str::to_string).unwrap_or_else(|| format!("call_{index}"));
            (
                index,
                json!({"id": id, "type": "function", "function": {"name": function["name"], "arguments": arguments}}),
            )
        })
        .collect()
}

fn to_chat(unified: &ChatRequest, model: &str) -> Result<Value, AdapterError> {
    let mut messages = Vec::new();
    for message in unified.messages() {
        let role = match &message.role {
            Role::Developer => "system",
            Role::Function => "tool",
            other => other.as_str(),
        };
        let mut out = json!({"role": role, "content": message.content.text()});
        let images: Vec<&str> = message
            .content
            .parts()
            .iter()
            .filter_map(|part| match part {
                Part::ImageUrl { url, .. } => Some(url.as_str()),
                _ => None,
            })
            .map(|url| parse_data_url(url).map(|(_, data)| data).ok_or(url))
            .collect::<Result<_, _>>()
            .map_err(|url| {
                adapter_error(ErrorKind::Unsupported, &format!("Ollama takes images as data: URLs only, not {url}"))
            })?;
        if !images.is_empty() {
            out["images"] = json!(images);
        }
        if !message.tool_calls.is_empty() {
            let calls: Vec<Value> = message
                .tool_calls
                .iter()
                .map(|c| {
                    let args = c.function.arguments.as_deref().unwrap_or("{}");
                    json!({"function": {"name": c.function.name, "arguments": serde_json::from_str::<Value>(args).unwrap_or(json!({}))}})
                })
                .collect();
            out["tool_calls"] = Value::Array(calls);
        }
        if role == "tool"
            && let Some(id) = &message.tool_call_id
        {
            out["tool_call_id"] = json!(id);
        }
        messages.push(out);
    }
    let mut options = Map::new();
    for (value, to) in [
        (&unified.temperature, "temperature"),
        (&unified.top_p, "top_p"),
        (&unified.top_k, "top_k"),
        (&unified.seed, "seed"),
    ] {
        if let Some(value) = value {
            options.insert(to.into(), value.clone());
        }
    }
    if let Some(n) = unified.max_tokens() {
        options.insert("num_predict".into(), json!(n));
    }
    if let Some(stop) = &unified.stop {
        options.insert("stop".into(), json!(stop));
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        // Ollama streams unless told otherwise.
        "stream": unified.streams(),
    });
    if !options.is_empty() {
        body["options"] = Value::Object(options);
    }
    if let Some(tools) = &unified.tools {
        body["tools"] = json!(tools);
    }
    if unified.thinking_off() {
        body["think"] = json!(false);
    } else if unified.thinking_budget().is_some() {
        body["think"] = json!(true);
    }
    if unified.wants_json_object() {
        body["format"] = json!("json");
    }
    Ok(body)
}

/// `GET {base_url}/api/tags`: the models pulled on the Ollama host.
impl adapter_kit::ModelsGuest for Ollama {
    fn list_request(ctx: SourceContext) -> Result<HttpRequest, AdapterError> {
        Ok(HttpRequest {
            method: "GET".into(),
            url: join_url(&ctx.base_url, "/api/tags"),
            headers: setting_headers(&ctx.settings).collect(),
            body: Vec::new(),
        })
    }

    fn read_list(_ctx: SourceContext, response: HttpResponse) -> Result<Vec<String>, AdapterError> {
        adapter_kit::model_ids(&response, "models", |m| {
            m.get("name").or_else(|| m.get("model")).and_then(Value::as_str).map(str::to_string)
        })
    }
}

adapter_kit::no_native!(Ollama);
adapter_kit::export!(Ollama);
