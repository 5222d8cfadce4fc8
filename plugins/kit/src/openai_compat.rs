//! The OpenAI Chat Completions dialect, shared by every adapter for an OpenAI-compatible
//! upstream (`openai`, `deepseek`): a checked pass-through, with a per-dialect hook for the
//! fields a provider names its own way.

use std::cell::Cell;
use std::marker::PhantomData;

use serde_json::{Map, Value, json};

use crate::errors::{adapter_error, error_fields, upstream_error};
use crate::http::{join_url, setting_headers};
use crate::{
    AdapterError, ClientRequest, ErrorKind, GuestNativeSession, GuestSession, HttpRequest, HttpResponse, Metadata,
    NativeOutput, NativeProtocol, NativeResponse, Operation, SourceContext, StreamEvent, StreamFraming, StreamOutput,
    parse_request, setting,
};

/// What sets one OpenAI-compatible provider apart.
pub trait Dialect: 'static {
    const NAME: &'static str;

    /// Rewrites a response or chunk into the unified form; returns whether it changed anything
    /// (unchanged bodies are passed on byte for byte).
    fn normalize(_value: &mut Value) -> bool {
        false
    }
}

pub fn metadata<D: Dialect>() -> Metadata {
    crate::metadata(D::NAME, "openai-chat", StreamFraming::Sse)
}

/// The source's key as the site wants it: `Authorization: Bearer`, or the `auth_header` setting.
fn auth_header(ctx: &SourceContext) -> Option<(String, String)> {
    if ctx.api_key.is_empty() {
        return None;
    }
    let name = setting(ctx, "auth_header").unwrap_or("authorization");
    let value = if name.eq_ignore_ascii_case("authorization") {
        format!("Bearer {}", ctx.api_key)
    } else {
        ctx.api_key.clone()
    };
    Some((name.to_string(), value))
}

/// `GET {base_url}/models` (or the `models_path` setting) with the source's key.
pub fn models_request(ctx: &SourceContext) -> HttpRequest {
    let mut headers: Vec<(String, String)> = auth_header(ctx).into_iter().collect();
    headers.extend(setting_headers(&ctx.settings));
    HttpRequest {
        method: "GET".into(),
        url: join_url(&ctx.base_url, setting(ctx, "models_path").unwrap_or("/models")),
        headers,
        body: Vec::new(),
    }
}

/// The ids of an OpenAI model list (`{data: [{id}]}`).
pub fn read_models(response: &HttpResponse) -> Result<Vec<String>, AdapterError> {
    crate::model_ids(response, "data", |m| m.get("id").and_then(Value::as_str).map(str::to_string))
}

/// Whether the upstream model takes `reasoning_effort`: the source's `reasoning_effort` setting
/// (`send` or `drop`), else OpenAI's reasoning families by name (o1, o3, o4, gpt-5, gpt-oss, codex).
fn takes_effort(ctx: &SourceContext) -> bool {
    match setting(ctx, "reasoning_effort") {
        Some("send") => true,
        Some("drop") => false,
        _ => {
            let model = ctx.upstream_model.rsplit('/').next().unwrap_or_default().to_ascii_lowercase();
            ["o1", "o3", "o4", "gpt-5", "gpt-oss"].iter().any(|family| model.starts_with(family))
                || model.contains("codex")
        }
    }
}

/// Whether the upstream takes `prompt_cache_key`: the source's `prompt_cache_key` setting
/// (`send` or `drop`), else only OpenAI's own API (compatible sites may refuse the field).
fn takes_cache_key(ctx: &SourceContext) -> bool {
    match setting(ctx, "prompt_cache_key") {
        Some("send") => true,
        Some("drop") => false,
        _ => {
            let host =
                ctx.base_url.split("://").nth(1).unwrap_or_default().split(['/', ':']).next().unwrap_or_default();
            host.eq_ignore_ascii_case("api.openai.com")
        }
    }
}

/// Gateway-only request fields an OpenAI upstream would reject.
/// (`thinking` and `top_k` arrive from Anthropic clients through the /v1/messages front door.)
const GATEWAY_FIELDS: &[&str] = &["disable_thinking", "thinking", "top_k"];

pub struct Session<D: Dialect> {
    ctx: SourceContext,
    /// A choice has reported its finish_reason.
    finished: Cell<bool>,
    /// `data: [DONE]` arrived.
    done: Cell<bool>,
    dialect: PhantomData<D>,
}

impl<D: Dialect> Session<D> {
    /// The upstream request for a request body (unified, or a chat client's own).
    fn upstream_request(&self, mut body: Map<String, Value>) -> HttpRequest {
        body.insert("model".into(), Value::String(self.ctx.upstream_model.clone()));
        // An effort the gateway derived (an Anthropic client's adaptive thinking) goes only to
        // models that take one: others refuse the field outright.
        if let Some(hint) = body.remove("reasoning_effort_hint")
            && !body.contains_key("reasoning_effort")
            && takes_effort(&self.ctx)
        {
            body.insert("reasoning_effort".into(), hint);
        }
        // Likewise a cache key the gateway derived (an Anthropic client's cache markers) goes
        // only where `prompt_cache_key` is known.
        if let Some(hint) = body.remove("prompt_cache_key_hint")
            && !body.contains_key("prompt_cache_key")
            && takes_cache_key(&self.ctx)
        {
            body.insert("prompt_cache_key".into(), hint);
        }
        for field in GATEWAY_FIELDS {
            body.remove(*field);
        }
        let streaming = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        // Usage arrives on streams only when asked for; sites that reject the field opt out
        // (the gateway then estimates the tokens).
        if setting(&self.ctx, "stream_usage") == Some("false") {
            body.remove("stream_options");
        } else if streaming && !body.contains_key("stream_options") {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        headers.extend(auth_header(&self.ctx));
        if streaming {
            headers.push(("accept".into(), "text/event-stream".into()));
        }
        headers.extend(setting_headers(&self.ctx.settings));
        let path = match self.ctx.operation {
            Operation::Chat => setting(&self.ctx, "path").unwrap_or("/chat/completions"),
            Operation::Embedding => setting(&self.ctx, "embeddings_path").unwrap_or("/embeddings"),
            Operation::Image => setting(&self.ctx, "images_path").unwrap_or("/images/generations"),
        };
        HttpRequest {
            method: "POST".into(),
            url: join_url(&self.ctx.base_url, path),
            headers,
            body: serde_json::to_vec(&Value::Object(body)).expect("a JSON map serialises"),
        }
    }
}

impl<D: Dialect> GuestSession for Session<D> {
    fn new(ctx: SourceContext) -> Self {
        Session { ctx, finished: Cell::new(false), done: Cell::new(false), dialect: PhantomData }
    }

    fn transform_request(&self, request: String) -> Result<HttpRequest, AdapterError> {
        Ok(self.upstream_request(parse_request(&request)?))
    }

    fn transform_response(&self, response: HttpResponse) -> Result<String, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        let value: Value = crate::parse_body(&response.body)?;
        let mut value = value;
        let list = match self.ctx.operation {
            Operation::Chat => "choices",
            Operation::Embedding | Operation::Image => "data",
        };
        if value.get(list).and_then(Value::as_array).is_none() {
            return Err(adapter_error(ErrorKind::InvalidResponse, &format!("upstream response has no `{list}` array")));
        }
        if D::normalize(&mut value) {
            return Ok(value.to_string());
        }
        Ok(String::from_utf8(response.body).expect("serde_json accepted it, so it is UTF-8"))
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<StreamOutput, AdapterError> {
        self.read_chunk(&event.data).map(|read| read.books)
    }

    fn finish_stream(&self) -> Result<StreamOutput, AdapterError> {
        // Some compatible servers close after the finish_reason without `[DONE]`: still complete.
        crate::stream_end(self.done.get() || self.finished.get(), "[DONE] or a finish_reason")
    }
}

/// One stream event read for the books.
struct ReadChunk {
    books: StreamOutput,
    /// A chunk with usage and no choices (asked for by `stream_options.include_usage`).
    usage_only: bool,
}

impl<D: Dialect> Session<D> {
    fn read_chunk(&self, data: &str) -> Result<ReadChunk, AdapterError> {
        let data = data.trim();
        let nothing = |done| ReadChunk { books: StreamOutput { chunks: vec![], done }, usage_only: false };
        if data == "[DONE]" {
            self.done.set(true);
            return Ok(nothing(true));
        }
        if data.is_empty() {
            return Ok(nothing(false));
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| adapter_error(ErrorKind::InvalidResponse, &format!("stream event is not JSON: {e}")))?;
        if value.get("error").is_some() {
            let (message, _) = error_fields(&value);
            return Err(adapter_error(
                ErrorKind::Server,
                &message.unwrap_or_else(|| "upstream sent an error event".into()),
            ));
        }
        let choices = value.get("choices").and_then(Value::as_array);
        if choices.is_some_and(|choices| choices.iter().any(|c| c.get("finish_reason").is_some_and(|f| !f.is_null()))) {
            self.finished.set(true);
        }
        let usage_only = value.get("usage").is_some_and(Value::is_object) && choices.is_none_or(Vec::is_empty);
        let mut value = value;
        let chunk = if D::normalize(&mut value) { value.to_string() } else { data.to_string() };
        Ok(ReadChunk { books: StreamOutput { chunks: vec![chunk], done: false }, usage_only })
    }
}

/// The client protocol a chat client speaks: the unified form itself.
pub const PROTOCOL: &str = "openai-chat";

/// Client headers passed upstream: they shape the answer and carry no credential (OpenAI's
/// beta switches, OpenRouter's app attribution). `OpenAI-Organization` and `OpenAI-Project` are
/// not: they name the client's account, and the upstream is called with the source's key.
pub const CLIENT_HEADERS: &[&str] = &["openai-beta", "http-referer", "x-title"];

/// What an OpenAI-compatible adapter forwards natively: chat clients, with [`CLIENT_HEADERS`].
pub fn protocols() -> Vec<NativeProtocol> {
    vec![NativeProtocol { name: PROTOCOL.into(), headers: CLIENT_HEADERS.iter().map(|h| h.to_string()).collect() }]
}

/// A chat client's request forwarded as sent, but for what the unified session changes too
/// (the model, gateway-only fields, usage asked for on streams), with its [`CLIENT_HEADERS`];
/// the answer and each event go back as the upstream sent them (or, where the dialect
/// normalizes, as its unified superset), and the books read the same. A usage-only chunk
/// reaches the client only when it asked for usage.
pub struct NativeSession<D: Dialect> {
    unified: Session<D>,
    /// The client's own `stream_options.include_usage`.
    client_wants_usage: Cell<bool>,
    /// The upstream's `data: [DONE]` was passed on.
    done_passed: Cell<bool>,
}

impl<D: Dialect> GuestNativeSession for NativeSession<D> {
    fn new(ctx: SourceContext) -> Self {
        NativeSession {
            unified: Session::new(ctx),
            client_wants_usage: Cell::new(false),
            done_passed: Cell::new(false),
        }
    }

    fn transform_request(&self, request: ClientRequest) -> Result<HttpRequest, AdapterError> {
        let mut body = crate::native_body(&request, PROTOCOL)?;
        let wants = body.get("stream_options").and_then(|o| o.get("include_usage")).and_then(Value::as_bool);
        self.client_wants_usage.set(wants == Some(true));
        if body.get("stream").and_then(Value::as_bool) == Some(true) {
            match body.get_mut("stream_options").and_then(Value::as_object_mut) {
                Some(options) => {
                    options.insert("include_usage".into(), json!(true));
                }
                None => {
                    body.insert("stream_options".into(), json!({"include_usage": true}));
                }
            }
        }
        let mut http = self.unified.upstream_request(body);
        for (name, value) in request.headers.into_iter().filter(|(k, _)| CLIENT_HEADERS.contains(&k.as_str())) {
            http.headers.push((name, value));
        }
        Ok(http)
    }

    fn transform_response(&self, response: HttpResponse) -> Result<NativeResponse, AdapterError> {
        // The unified reading is the upstream's body, or the dialect's normalized superset.
        let unified = self.unified.transform_response(response)?;
        Ok(NativeResponse { body: unified.clone().into_bytes(), unified })
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<NativeOutput, AdapterError> {
        let read = self.unified.read_chunk(&event.data)?;
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done_passed.set(true);
        }
        if data.is_empty() || (read.usage_only && !self.client_wants_usage.get()) {
            return Ok(crate::ended(read.books));
        }
        // As the upstream sent it, or the dialect's normalized superset.
        let event = match read.books.chunks.first() {
            Some(chunk) => StreamEvent { event: event.event, data: chunk.clone() },
            None => event,
        };
        Ok(crate::passed_on(event, read.books))
    }

    fn finish_stream(&self) -> Result<NativeOutput, AdapterError> {
        let mut out = crate::ended(self.unified.finish_stream()?);
        // Complete without `[DONE]` (a finish_reason, then the upstream closed): chat clients
        // wait for it, so it is sent.
        if !self.done_passed.get() {
            out.events.push(StreamEvent { event: "message".into(), data: "[DONE]".into() });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(model: &str, settings: &[(&str, &str)]) -> SourceContext {
        SourceContext {
            operation: Operation::Chat,
            source_name: "s".into(),
            base_url: "http://x".into(),
            api_key: String::new(),
            upstream_model: model.into(),
            settings: settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    #[test]
    fn an_effort_hint_goes_only_to_reasoning_models_unless_the_source_says() {
        assert!(takes_effort(&ctx("o3-mini", &[])) && takes_effort(&ctx("gpt-5-codex", &[])));
        assert!(takes_effort(&ctx("openai/gpt-oss-120b", &[])));
        assert!(!takes_effort(&ctx("gpt-4o", &[])) && !takes_effort(&ctx("llama-3.3-70b", &[])));
        assert!(takes_effort(&ctx("gpt-4o", &[("reasoning_effort", "send")])));
        assert!(!takes_effort(&ctx("o3", &[("reasoning_effort", "drop")])));
    }

    #[test]
    fn a_cache_key_hint_goes_to_openai_itself_unless_the_source_says() {
        let at = |url: &str, settings: &[(&str, &str)]| SourceContext { base_url: url.into(), ..ctx("m", settings) };
        assert!(takes_cache_key(&at("https://api.openai.com/v1", &[])));
        assert!(!takes_cache_key(&at("https://api.groq.com/openai/v1", &[])));
        assert!(takes_cache_key(&at("http://127.0.0.1:8000/v1", &[("prompt_cache_key", "send")])));
        assert!(!takes_cache_key(&at("https://api.openai.com/v1", &[("prompt_cache_key", "drop")])));
    }
}
