//! A mock OpenAI upstream on 127.0.0.1:0 speaking the wire format byte for byte (fixtures
//! from the API reference). The upstream model name picks the behaviour; tests steer
//! streams through a gate and observe disconnects, so nothing waits on a sleep.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};

pub const CHAT_JSON: &str = include_str!("../../fixtures/openai/chat.json");
pub const CHAT_SSE: &str = include_str!("../../fixtures/openai/chat.sse");
pub const ERROR_429: &str = include_str!("../../fixtures/openai/error_429.json");
pub const ERROR_401: &str = include_str!("../../fixtures/openai/error_401.json");
pub const TOOLS_SSE: &str = include_str!("../../fixtures/openai/tools.sse");
pub const OLLAMA_CHAT: &str = include_str!("../../fixtures/ollama/chat.json");
pub const OLLAMA_NDJSON: &str = include_str!("../../fixtures/ollama/chat.ndjson");
pub const OLLAMA_THINKING_NDJSON: &str = include_str!("../../fixtures/ollama/thinking.ndjson");
pub const OLLAMA_TOOLS_NDJSON: &str = include_str!("../../fixtures/ollama/tools.ndjson");
pub const DEEPSEEK_JSON: &str = include_str!("../../fixtures/deepseek/chat.json");
pub const DEEPSEEK_SSE: &str = include_str!("../../fixtures/deepseek/chat.sse");
pub const GEMINI_JSON: &str = include_str!("../../fixtures/gemini/generate.json");
pub const GEMINI_SSE: &str = include_str!("../../fixtures/gemini/stream.sse");
pub const GEMINI_TOOLS_SSE: &str = include_str!("../../fixtures/gemini/tools.sse");
pub const GEMINI_ERROR_429: &str = include_str!("../../fixtures/gemini/error_429.json");
pub const OPENAI_EMBEDDINGS: &str = include_str!("../../fixtures/openai/embeddings.json");
pub const GEMINI_BATCH_EMBED: &str = include_str!("../../fixtures/gemini/batch_embed.json");
pub const OPENAI_IMAGES: &str = include_str!("../../fixtures/openai/images.json");
pub const IMAGEN_PREDICT: &str = include_str!("../../fixtures/gemini/imagen_predict.json");
pub const GEMINI_IMAGE: &str = include_str!("../../fixtures/gemini/generate_image.json");
pub const OLLAMA_EMBED: &str = include_str!("../../fixtures/ollama/embed.json");
pub const CLAUDE_MESSAGE: &str = include_str!("../../fixtures/anthropic/message.json");
pub const CLAUDE_TEXT_SSE: &str = include_str!("../../fixtures/anthropic/text.sse");
pub const CLAUDE_TOOLS_SSE: &str = include_str!("../../fixtures/anthropic/tools.sse");
pub const CLAUDE_THINKING_SSE: &str = include_str!("../../fixtures/anthropic/thinking.sse");
pub const CLAUDE_MIDSTREAM_ERROR_SSE: &str = include_str!("../../fixtures/anthropic/midstream_error.sse");
pub const OPENAI_RESPONSES: &str = include_str!("../../fixtures/openai/responses.json");
pub const OPENAI_RESPONSES_SSE: &str = include_str!("../../fixtures/openai/responses_tools.sse");
pub const CLAUDE_CODE_SSE: &str = include_str!("../../fixtures/anthropic/claude_code.sse");
pub const CLAUDE_ERROR_529: &str = include_str!("../../fixtures/anthropic/error_529.json");

/// One request as the upstream saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub headers: HeaderMap,
    pub body: Value,
}

pub struct MockState {
    pub requests: Mutex<Vec<Recorded>>,
    /// `gated` streams send their next event only after the test adds a permit.
    pub gate: Semaphore,
    /// Signalled when a streaming response body is dropped (the gateway hung up).
    pub hung_up: Notify,
    pub hung_up_flag: AtomicBool,
    /// While set, the `flaky` model answers 500.
    pub flaky_fails: AtomicBool,
}

impl Default for MockState {
    fn default() -> Self {
        MockState {
            requests: Mutex::default(),
            gate: Semaphore::new(0),
            hung_up: Notify::new(),
            hung_up_flag: AtomicBool::new(false),
            flaky_fails: AtomicBool::new(false),
        }
    }
}

impl MockState {
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

pub struct MockUpstream {
    /// Base URL including `/v1`, as a source's `base_url`.
    pub url: String,
    pub state: Arc<MockState>,
}

impl MockUpstream {
    pub async fn start() -> MockUpstream {
        let state = Arc::new(MockState::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/messages", post(messages))
            .route("/v1/responses", post(responses_api))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/models", get(model_list))
            .route("/v1beta/models", get(gemini_models))
            .route("/api/tags", get(ollama_tags))
            .route("/api/chat", post(ollama))
            .route("/v1/embeddings", post(fixed(OPENAI_EMBEDDINGS)))
            .route("/v1/images/generations", post(fixed(OPENAI_IMAGES)))
            .route("/api/embed", post(fixed(OLLAMA_EMBED)))
            .route("/v1beta/models/{call}", post(gemini))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        MockUpstream { url: format!("http://{addr}/v1"), state }
    }
}

/// The fixture stream split into its events, each with its trailing blank line.
pub fn sse_events() -> Vec<String> {
    events_of(CHAT_SSE)
}

pub fn events_of(sse: &str) -> Vec<String> {
    sse.split_inclusive("\n\n").map(str::to_string).collect()
}

fn replay(sse: &str) -> Response {
    sse_body(futures::stream::iter(events_of(sse).into_iter().map(|e| Ok(Bytes::from(e))).collect::<Vec<_>>()))
}

/// A handler that records the request and answers one JSON fixture.
fn fixed(
    fixture: &'static str,
) -> impl Fn(State<Arc<MockState>>, HeaderMap, Bytes) -> std::future::Ready<Response> + Clone + Send + Sync + 'static {
    move |State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes| {
        let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
        state.requests.lock().unwrap().push(Recorded { headers, body });
        std::future::ready((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], fixture).into_response())
    }
}

/// Gemini's generateContent / streamGenerateContent?alt=sse (events end in CRLF CRLF).
async fn gemini(
    State(state): State<Arc<MockState>>,
    axum::extract::Path(call): axum::extract::Path<String>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
    state
        .requests
        .lock()
        .unwrap()
        .push(Recorded { headers, body: serde_json::json!({"call": call, "query": uri.query(), "body": body}) });
    let (model, method) = call.split_once(':').expect("model:method");
    let json = |status: StatusCode, text: &'static str| {
        (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
    };
    let gemini_events = |sse: &str| -> Vec<Result<Bytes, Infallible>> {
        sse.split_inclusive("\r\n\r\n").map(|e| Ok(Bytes::from(e.to_string()))).collect()
    };
    match (model, method) {
        ("gemini-quota", _) => json(StatusCode::TOO_MANY_REQUESTS, GEMINI_ERROR_429),
        (_, "batchEmbedContents") => json(StatusCode::OK, GEMINI_BATCH_EMBED),
        (_, "predict") => json(StatusCode::OK, IMAGEN_PREDICT),
        ("gemini-image", "generateContent") => json(StatusCode::OK, GEMINI_IMAGE),
        (_, "generateContent") => json(StatusCode::OK, GEMINI_JSON),
        ("gemini-tools", _) => sse_body(futures::stream::iter(gemini_events(GEMINI_TOOLS_SSE))),
        ("gemini-cut", _) => {
            sse_body(futures::stream::iter(gemini_events(GEMINI_SSE).into_iter().take(1).collect::<Vec<_>>()))
        }
        _ => sse_body(futures::stream::iter(gemini_events(GEMINI_SSE))),
    }
}

/// Ollama's native chat API: NDJSON, one line per body chunk.
async fn ollama(State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
    state.requests.lock().unwrap().push(Recorded { headers, body: body.clone() });
    let lines = |text: &str| -> Vec<Result<Bytes, Infallible>> {
        text.split_inclusive('\n').map(|l| Ok(Bytes::from(l.to_string()))).collect()
    };
    let ndjson = |chunks: Vec<Result<Bytes, Infallible>>| {
        Response::builder()
            .header(header::CONTENT_TYPE, "application/x-ndjson")
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap()
    };
    match (body["model"].as_str().unwrap_or_default(), body["stream"].as_bool().unwrap_or(true)) {
        ("llama-missing", _) => {
            (StatusCode::NOT_FOUND, r#"{"error":"model 'llama-missing' not found"}"#).into_response()
        }
        (_, false) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], OLLAMA_CHAT).into_response(),
        ("llama-tools", true) => ndjson(lines(OLLAMA_TOOLS_NDJSON)),
        ("llama-think", true) => ndjson(lines(OLLAMA_THINKING_NDJSON)),
        ("llama-cut", true) => ndjson(lines(OLLAMA_NDJSON).into_iter().take(2).collect()),
        _ => ndjson(lines(OLLAMA_NDJSON)),
    }
}

/// Anthropic's Messages API: the upstream model name picks the fixture.
async fn messages(State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
    state.requests.lock().unwrap().push(Recorded { headers, body: body.clone() });
    let model = body["model"].as_str().unwrap_or_default().to_string();
    let streaming = body["stream"].as_bool().unwrap_or(false);
    match model.as_str() {
        "claude-overloaded" => {
            (StatusCode::from_u16(529).unwrap(), [(header::CONTENT_TYPE, "application/json")], CLAUDE_ERROR_529)
                .into_response()
        }
        _ if !streaming => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], CLAUDE_MESSAGE).into_response()
        }
        "claude-tools" => replay(CLAUDE_TOOLS_SSE),
        "claude-thinking" => replay(CLAUDE_THINKING_SSE),
        "claude-code" => replay(CLAUDE_CODE_SSE),
        "claude-midstream-error" => replay(CLAUDE_MIDSTREAM_ERROR_SSE),
        // Everything up to (not including) message_delta: a stream cut before it finished.
        "claude-cut" => replay(&CLAUDE_TEXT_SSE[..CLAUDE_TEXT_SSE.find("event: message_delta").unwrap()]),
        _ => replay(CLAUDE_TEXT_SSE),
    }
}

/// `GET /v1/models`: Anthropic's list to a request with `x-api-key`, OpenAI's otherwise.
async fn model_list(State(state): State<Arc<MockState>>, headers: HeaderMap) -> Response {
    let anthropic = headers.contains_key("x-api-key");
    state.requests.lock().unwrap().push(Recorded { headers, body: serde_json::json!({"call": "models"}) });
    let body = if anthropic {
        include_str!("../../fixtures/models/anthropic.json")
    } else {
        include_str!("../../fixtures/models/openai.json")
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn gemini_models() -> Response {
    let body = include_str!("../../fixtures/models/gemini.json");
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn ollama_tags() -> Response {
    let body = include_str!("../../fixtures/models/ollama.json");
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Anthropic's token counting: `{"input_tokens": N}`, as its API reference shows.
async fn count_tokens(State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
    state.requests.lock().unwrap().push(Recorded { headers, body });
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], "{\"input_tokens\":2095}").into_response()
}

/// OpenAI's Responses API: `resp-cut` stops after the function call opened, `resp-failed`
/// fails after its first events; anything else answers the fixtures.
async fn responses_api(State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
    state.requests.lock().unwrap().push(Recorded { headers, body: body.clone() });
    let events = events_of(OPENAI_RESPONSES_SSE);
    match (body["model"].as_str().unwrap_or_default(), body["stream"].as_bool().unwrap_or(false)) {
        (_, false) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], OPENAI_RESPONSES).into_response(),
        ("resp-cut", true) => replay(&events[..10].concat()),
        ("resp-failed", true) => {
            let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_0f3a9c1d2e4b5a6978\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model had an error.\"},\"output\":[]}}\n\n";
            replay(&format!("{}{failed}", events[..2].concat()))
        }
        (_, true) => replay(OPENAI_RESPONSES_SSE),
    }
}

async fn chat(State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
    state.requests.lock().unwrap().push(Recorded { headers, body: body.clone() });
    let model = body["model"].as_str().unwrap_or_default().to_string();
    let streaming = body["stream"].as_bool().unwrap_or(false);
    if let Some(text) = model.strip_prefix("say:") {
        return said(&model, text, streaming);
    }
    if let Some(text) = model.strip_prefix("say3:") {
        return said_in(&model, text, streaming, 3);
    }
    if model == "call-last-tool" {
        return called_last_tool(&body, streaming);
    }
    match model.as_str() {
        // Describes the first image it is shown by its URL; fails on URLs containing "broken".
        "vision" => {
            let url = body["messages"][0]["content"][1]["image_url"]["url"].as_str().unwrap_or_default().to_string();
            if url.contains("broken") {
                return (StatusCode::INTERNAL_SERVER_ERROR, "vision model crashed").into_response();
            }
            said(&model, &format!("a picture at {url}"), streaming)
        }
        // Ranks (answers with the number of the longest candidate) or judges (names how many
        // candidates it saw and the first line of each).
        "judge" => {
            let task = body["messages"][0]["content"].as_str().unwrap_or_default();
            let user = body["messages"][1]["content"].as_str().unwrap_or_default();
            let answers: Vec<&str> = user.split("\n[").skip(1).map(|a| a.split_once("]\n").map_or("", |x| x.1).trim()).collect();
            if task.contains("number of the best") {
                let best = (0..answers.len()).max_by_key(|i| answers[*i].len()).map_or(0, |i| i + 1);
                return said(&model, &best.to_string(), streaming);
            }
            let verdict = format!("judged {} answers: {}", answers.len(), answers.join(" + "));
            said(&model, &verdict, streaming)
        }
        // Never answers.
        "hang" => futures::future::pending::<Response>().await,
        "error-429" => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::CONTENT_TYPE, "application/json"), (header::RETRY_AFTER, "20")],
            ERROR_429,
        )
            .into_response(),
        "error-401" => {
            (StatusCode::UNAUTHORIZED, [(header::CONTENT_TYPE, "application/json")], ERROR_401).into_response()
        }
        "error-500" => (StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response(),
        "flaky" if state.flaky_fails.load(Ordering::SeqCst) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "flaky upstream is down").into_response()
        }
        "error-400" => (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"error":{"message":"Invalid 'messages': empty.","type":"invalid_request_error","param":"messages","code":null}}"#,
        )
            .into_response(),
        "not-json" => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], "<html>oops</html>").into_response()
        }
        "deepseek-fixture" if !streaming => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], DEEPSEEK_JSON).into_response()
        }
        "deepseek-fixture" => replay(DEEPSEEK_SSE),
        _ if !streaming => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], CHAT_JSON).into_response(),
        "gated" | "held" => sse_body(gated(state, sse_events())),
        // Answers 200, then never sends an event.
        "stall" => sse_body(futures::stream::pending()),
        "tools" => replay(TOOLS_SSE),
        // Closes after the usage chunk, without `data: [DONE]` (some compatible servers do).
        "no-done" => {
            let events = sse_events();
            replay(&events[..events.len() - 1].concat())
        }
        "silent" => sse_body(
            futures::stream::iter(vec![Ok(Bytes::from(sse_events()[0].clone()))]).chain(futures::stream::pending()),
        ),
        "cut" => sse_body(futures::stream::iter(
            sse_events()[..3].iter().map(|e| Ok(Bytes::from(e.clone()))).collect::<Vec<_>>(),
        )),
        _ => sse_body(futures::stream::iter(sse_events().into_iter().map(|e| Ok(Bytes::from(e))).collect::<Vec<_>>())),
    }
}

use futures::StreamExt;

/// A chat completion (or its stream) whose answer is `text`, 10 + len/4 tokens.
fn said(model: &str, text: &str, streaming: bool) -> Response {
    said_in(model, text, streaming, 2)
}

/// `text` as a whole answer, or streamed in `pieces` pieces of (about) equal length.
fn said_in(model: &str, text: &str, streaming: bool, pieces: usize) -> Response {
    let usage = serde_json::json!({"prompt_tokens": 10, "completion_tokens": text.len() / 4, "total_tokens": 10 + text.len() / 4});
    if !streaming {
        let body = serde_json::json!({"id": "chatcmpl-said", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage});
        return (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response();
    }
    let chunk = |choices: Value, usage: Value| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"id": "chatcmpl-said", "object": "chat.completion.chunk",
            "created": 1, "model": model, "choices": choices, "usage": usage})
        )
    };
    let mut events = vec![chunk(
        serde_json::json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
        Value::Null,
    )];
    // Several pieces, so streaming is visible.
    let chars: Vec<char> = text.chars().collect();
    let cut = |i: usize| i * chars.len() / pieces;
    for piece in (0..pieces).map(|i| chars[cut(i)..cut(i + 1)].iter().collect::<String>()) {
        events.push(chunk(
            serde_json::json!([{"index": 0, "delta": {"content": piece}, "finish_reason": null}]),
            Value::Null,
        ));
    }
    events.push(chunk(serde_json::json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]), Value::Null));
    events.push(chunk(serde_json::json!([]), usage));
    events.push("data: [DONE]\n\n".to_string());
    sse_body(futures::stream::iter(events.into_iter().map(|e| Ok(Bytes::from(e))).collect::<Vec<_>>()))
}

/// Calls the request's last tool, by the name it was given, with `{}`.
fn called_last_tool(body: &Value, streaming: bool) -> Response {
    let name = body["tools"].as_array().and_then(|t| t.last()).map_or(Value::Null, |t| t["function"]["name"].clone());
    let call =
        serde_json::json!({"id": "call_last", "type": "function", "function": {"name": name, "arguments": "{}"}});
    let usage = serde_json::json!({"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25});
    if !streaming {
        let body = serde_json::json!({"id": "chatcmpl-call", "object": "chat.completion", "created": 1, "model": "call-last-tool",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [call]}, "finish_reason": "tool_calls"}],
            "usage": usage});
        return (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response();
    }
    let chunk = |delta: Value, finish: Value, usage: Value| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"id": "chatcmpl-call", "object": "chat.completion.chunk", "created": 1,
            "model": "call-last-tool", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage})
        )
    };
    let mut streamed = call.clone();
    streamed["index"] = serde_json::json!(0);
    let events = vec![
        chunk(serde_json::json!({"role": "assistant", "tool_calls": [streamed]}), Value::Null, Value::Null),
        chunk(serde_json::json!({}), serde_json::json!("tool_calls"), usage),
        "data: [DONE]\n\n".to_string(),
    ];
    sse_body(futures::stream::iter(events.into_iter().map(|e| Ok(Bytes::from(e))).collect::<Vec<_>>()))
}

fn sse_body(events: impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    Response::builder().header(header::CONTENT_TYPE, "text/event-stream").body(Body::from_stream(events)).unwrap()
}

/// Sends the first event at once, then one more per gate permit; notes when it is dropped.
fn gated(state: Arc<MockState>, events: Vec<String>) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send {
    struct HangUp(Arc<MockState>);
    impl Drop for HangUp {
        fn drop(&mut self) {
            self.0.hung_up_flag.store(true, Ordering::SeqCst);
            self.0.hung_up.notify_one();
        }
    }
    let guard = HangUp(state);
    futures::stream::unfold((guard, events.into_iter(), true), |(guard, mut events, first)| async move {
        let event = events.next()?;
        if !first {
            guard.0.gate.acquire().await.unwrap().forget();
        }
        Some((Ok(Bytes::from(event)), (guard, events, false)))
    })
}
