//! Built-in `gemini` adapter: Google's Generative Language API (`generateContent`,
//! `streamGenerateContent?alt=sse`, `x-goog-api-key`). base_url e.g.
//! `https://generativelanguage.googleapis.com/v1beta`.

mod images;
mod request;

use std::cell::RefCell;

use adapter_kit::errors::{adapter_error, upstream_error};
use adapter_kit::http::{join_url, setting_headers};
use adapter_kit::unified::{self, ChunkBuilder, Usage};
use adapter_kit::{
    AdapterError, ErrorKind, Guest, GuestSession, HttpRequest, HttpResponse, Metadata, Operation, SourceContext,
    StreamEvent, StreamFraming, StreamOutput, host,
};
use serde_json::{Value, json};

struct Gemini;

impl Guest for Gemini {
    type Session = Session;

    fn describe() -> Metadata {
        adapter_kit::metadata("gemini", "gemini-generate-content", StreamFraming::Sse)
    }
}

#[derive(Default)]
struct StreamState {
    include_usage: bool,
    started: bool,
    finished: bool,
    tool_calls: usize,
    usage: Option<Usage>,
    chunks: ChunkBuilder,
}

struct Session {
    ctx: SourceContext,
    stream: RefCell<StreamState>,
    /// An images request asked for `response_format: url`.
    image_urls: std::cell::Cell<bool>,
}

/// What one GenerateContentResponse holds, in unified terms.
struct Candidate {
    text: String,
    thought: String,
    /// (name, args as a JSON string).
    calls: Vec<(String, String)>,
    finish: Option<&'static str>,
}

fn candidate(response: &Value) -> Candidate {
    let first = &response["candidates"][0];
    let mut out = Candidate { text: String::new(), thought: String::new(), calls: Vec::new(), finish: None };
    for part in first["content"]["parts"].as_array().into_iter().flatten() {
        if let Some(call) = part.get("functionCall") {
            let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
            out.calls.push((call["name"].as_str().unwrap_or_default().to_string(), args.to_string()));
        } else if let Some(text) = part["text"].as_str() {
            if part["thought"] == true { out.thought.push_str(text) } else { out.text.push_str(text) }
        }
    }
    out.finish = first["finishReason"].as_str().map(|reason| match reason {
        "MAX_TOKENS" => "length",
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => "content_filter",
        _ => "stop",
    });
    out
}

fn usage(response: &Value) -> Option<Usage> {
    let meta = response.get("usageMetadata")?;
    let n = |k: &str| meta.get(k).and_then(Value::as_u64);
    let thoughts = n("thoughtsTokenCount");
    Some(Usage {
        prompt: n("promptTokenCount"),
        // Gemini counts thinking apart from the answer; OpenAI counts it in completion tokens.
        completion: n("candidatesTokenCount").map(|c| c + thoughts.unwrap_or(0)),
        cached: n("cachedContentTokenCount"),
        cache_creation: None,
        reasoning: thoughts,
    })
}

/// Gemini has no tool-call ids on older models: make stable ones the client can echo back.
fn call_id(response_id: &str, index: usize) -> String {
    format!("call_{response_id}_{index}")
}

impl Session {
    /// A POST under base_url, authenticated with `x-goog-api-key`.
    fn post(&self, path: &str, body: Value) -> HttpRequest {
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if !self.ctx.api_key.is_empty() {
            headers.push(("x-goog-api-key".into(), self.ctx.api_key.clone()));
        }
        headers.extend(setting_headers(&self.ctx.settings));
        HttpRequest {
            method: "POST".into(),
            url: join_url(&self.ctx.base_url, path),
            headers,
            body: serde_json::to_vec(&body).expect("JSON serialises"),
        }
    }
}

impl GuestSession for Session {
    fn new(ctx: SourceContext) -> Self {
        Session { ctx, stream: RefCell::new(StreamState::default()), image_urls: std::cell::Cell::new(false) }
    }

    fn transform_request(&self, request: String) -> Result<HttpRequest, AdapterError> {
        if self.ctx.operation == Operation::Embedding {
            let embeddings = adapter_kit::parse_embeddings(&request)?;
            let model = format!("models/{}", self.ctx.upstream_model);
            let requests: Vec<Value> = embeddings
                .inputs()
                .iter()
                .map(|text| {
                    let mut r = json!({"model": model, "content": {"parts": [{"text": text}]}});
                    if let Some(d) = &embeddings.dimensions {
                        r["outputDimensionality"] = d.clone();
                    }
                    r
                })
                .collect();
            return Ok(self.post(&format!("{model}:batchEmbedContents"), json!({"requests": requests})));
        }
        if self.ctx.operation == Operation::Image {
            let images = adapter_kit::parse_images(&request)?;
            self.image_urls.set(images.response_format.as_deref() == Some("url"));
            let (path, body) = images::request(&self.ctx.upstream_model, &images);
            return Ok(self.post(&path, body));
        }
        let unified = adapter_kit::parse_chat(&request)?;
        self.stream.borrow_mut().include_usage = unified.wants_stream_usage();
        let streaming = unified.streams();
        let body = request::to_generate_content(&unified)?;
        let method = if streaming { "streamGenerateContent?alt=sse" } else { "generateContent" };
        Ok(self.post(&format!("models/{}:{method}", self.ctx.upstream_model), body))
    }

    fn transform_response(&self, response: HttpResponse) -> Result<String, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        let value: Value = adapter_kit::parse_body(&response.body)?;
        if self.ctx.operation == Operation::Embedding {
            let vectors = value["embeddings"]
                .as_array()
                .ok_or_else(|| adapter_error(ErrorKind::InvalidResponse, "upstream response has no `embeddings`"))?
                .iter()
                .map(|e| e["values"].clone())
                .collect();
            return Ok(unified::embedding_list(&self.ctx.upstream_model, vectors, None));
        }
        if self.ctx.operation == Operation::Image {
            return images::response(&value, self.image_urls.get());
        }
        if value.get("candidates").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            let reason = value["promptFeedback"]["blockReason"].as_str().unwrap_or("no candidates");
            return Err(adapter_error(ErrorKind::ContentPolicy, &format!("Gemini returned no answer: {reason}")));
        }
        let id = value["responseId"].as_str().unwrap_or("gemini").to_string();
        let c = candidate(&value);
        let mut message = json!({"role": "assistant", "content": if c.text.is_empty() && !c.calls.is_empty() { Value::Null } else { json!(c.text) }});
        if !c.thought.is_empty() {
            message["reasoning_content"] = json!(c.thought);
        }
        let finish = if c.calls.is_empty() { c.finish } else { Some("tool_calls") };
        if !c.calls.is_empty() {
            let calls: Vec<Value> = c
                .calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| json!({"id": call_id(&id, i), "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        Ok(unified::response(
            &id,
            value["modelVersion"].as_str().unwrap_or(&self.ctx.upstream_model),
            host::now_unix_ms() / 1000,
            message,
            finish,
            usage(&value),
        ))
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<StreamOutput, AdapterError> {
        let value: Value = serde_json::from_str(&event.data)
            .map_err(|e| adapter_error(ErrorKind::InvalidResponse, &format!("stream event is not JSON: {e}")))?;
        if value.get("error").is_some() {
            let (message, _) = adapter_kit::errors::error_fields(&value);
            return Err(adapter_error(ErrorKind::Server, &message.unwrap_or_else(|| "upstream stream error".into())));
        }
        let mut st = self.stream.borrow_mut();
        let mut chunks = Vec::new();
        if !st.started {
            st.started = true;
            st.chunks = ChunkBuilder {
                id: value["responseId"].as_str().unwrap_or("gemini").to_string(),
                model: value["modelVersion"].as_str().unwrap_or(&self.ctx.upstream_model).to_string(),
                created: host::now_unix_ms() / 1000,
            };
            chunks.push(st.chunks.chunk(json!({"role": "assistant", "content": ""}), None));
        }
        let c = candidate(&value);
        if !c.thought.is_empty() {
            chunks.push(st.chunks.chunk(json!({"reasoning_content": c.thought}), None));
        }
        if !c.text.is_empty() {
            chunks.push(st.chunks.chunk(json!({"content": c.text}), None));
        }
        for (name, args) in c.calls {
            let index = st.tool_calls;
            st.tool_calls += 1;
            let id = call_id(&st.chunks.id, index);
            chunks.push(st.chunks.chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]}),
                None,
            ));
        }
        if let Some(u) = usage(&value) {
            st.usage = Some(u);
        }
        if let Some(finish) = c.finish {
            st.finished = true;
            let finish = if st.tool_calls > 0 { "tool_calls" } else { finish };
            chunks.push(st.chunks.chunk(json!({}), Some(finish)));
        }
        Ok(StreamOutput { chunks, done: false })
    }

    fn finish_stream(&self) -> Result<StreamOutput, AdapterError> {
        let st = self.stream.borrow();
        if !st.finished {
            return Err(adapter_error(ErrorKind::Truncated, "upstream stream ended before a finishReason"));
        }
        // Usage arrives with the last event; emit it once the body has ended.
        let chunks = match (st.include_usage, st.usage) {
            (true, Some(u)) => vec![st.chunks.usage_chunk(u.to_json())],
            _ => vec![],
        };
        Ok(StreamOutput { chunks, done: true })
    }
}

/// `GET {base_url}/models?pageSize=1000`: the models that generate content (`models/` cut off).
impl adapter_kit::ModelsGuest for Gemini {
    fn list_request(ctx: SourceContext) -> Result<HttpRequest, AdapterError> {
        let mut headers: Vec<(String, String)> = Vec::new();
        if !ctx.api_key.is_empty() {
            headers.push(("x-goog-api-key".into(), ctx.api_key.clone()));
        }
        headers.extend(setting_headers(&ctx.settings));
        Ok(HttpRequest {
            method: "GET".into(),
            url: join_url(&ctx.base_url, "/models?pageSize=1000"),
            headers,
            body: Vec::new(),
        })
    }

    fn read_list(_ctx: SourceContext, response: HttpResponse) -> Result<Vec<String>, AdapterError> {
        adapter_kit::model_ids(&response, "models", |m| {
            let methods = m.get("supportedGenerationMethods").and_then(Value::as_array);
            let generates = methods.is_none_or(|all| all.iter().any(|x| x == "generateContent" || x == "predict"));
            let name = m.get("name").and_then(Value::as_str)?;
            generates.then(|| name.strip_prefix("models/").unwrap_or(name).to_string())
        })
    }
}

adapter_kit::no_native!(Gemini);
adapter_kit::export!(Gemini);
