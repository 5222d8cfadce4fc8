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
use axum::routing::post;
use serde_json::Value;
use tokio::sync::{Notify, Semaphore};

pub const CHAT_JSON: &str = include_str!("../../fixtures/openai/chat.json");
pub const CHAT_SSE: &str = include_str!("../../fixtures/openai/chat.sse");
pub const ERROR_429: &str = include_str!("../../fixtures/openai/error_429.json");
pub const ERROR_401: &str = include_str!("../../fixtures/openai/error_401.json");

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
}

impl Default for MockState {
    fn default() -> Self {
        MockState {
            requests: Mutex::default(),
            gate: Semaphore::new(0),
            hung_up: Notify::new(),
            hung_up_flag: AtomicBool::new(false),
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
        let app = Router::new().route("/v1/chat/completions", post(chat)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        MockUpstream { url: format!("http://{addr}/v1"), state }
    }
}

/// The fixture stream split into its events, each with its trailing blank line.
pub fn sse_events() -> Vec<String> {
    CHAT_SSE.split_inclusive("\n\n").map(str::to_string).collect()
}

async fn chat(State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
    state.requests.lock().unwrap().push(Recorded { headers, body: body.clone() });
    let model = body["model"].as_str().unwrap_or_default().to_string();
    let streaming = body["stream"].as_bool().unwrap_or(false);
    match model.as_str() {
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
        "not-json" => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], "<html>oops</html>").into_response()
        }
        _ if !streaming => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], CHAT_JSON).into_response(),
        "gated" => sse(gated(state, sse_events())),
        "silent" => {
            sse(futures::stream::iter(vec![Ok(Bytes::from(sse_events()[0].clone()))]).chain(futures::stream::pending()))
        }
        "cut" => {
            sse(futures::stream::iter(sse_events()[..3].iter().map(|e| Ok(Bytes::from(e.clone()))).collect::<Vec<_>>()))
        }
        _ => sse(futures::stream::iter(sse_events().into_iter().map(|e| Ok(Bytes::from(e))).collect::<Vec<_>>())),
    }
}

use futures::StreamExt;

fn sse(events: impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
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
