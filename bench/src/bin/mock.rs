//! A zero-latency LLM upstream for benchmarks: OpenAI chat completions (JSON, or SSE with
//! CHUNKS events INTERVAL_MS apart) and Anthropic messages (JSON or SSE). A model name
//! containing `slow` answers after one second (connection and memory behaviour under load).
//! Speaks HTTP/1.1 and h2c (prior knowledge), with room for 100,000 streams a connection.
//! Usage: mock PORT   (env CHUNKS, default 20; INTERVAL_MS, default 10)

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;

const CHAT_JSON: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how may I assist you today?"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}"#;
const MESSAGE_JSON: &str = r#"{"id":"msg_bench","type":"message","role":"assistant","model":"bench","content":[{"type":"text","text":"Hello there, how may I assist you today?"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":12}}"#;

struct Shape {
    chunks: usize,
    interval: Duration,
}

fn shape() -> Shape {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    Shape { chunks: env("CHUNKS", 20) as usize, interval: Duration::from_millis(env("INTERVAL_MS", 10)) }
}

fn sse(events: Vec<String>, interval: Duration) -> Response {
    let stream = futures::stream::unfold((events.into_iter(), true), move |(mut it, first)| async move {
        let event = it.next()?;
        if !first && !interval.is_zero() {
            tokio::time::sleep(interval).await;
        }
        Some((Ok::<_, Infallible>(Bytes::from(event)), (it, false)))
    });
    Response::builder().header(header::CONTENT_TYPE, "text/event-stream").body(Body::from_stream(stream)).unwrap()
}

async fn pause_if_slow(body: &serde_json::Value) {
    if body["model"].as_str().is_some_and(|m| m.contains("slow")) {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn chat(body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    pause_if_slow(&body).await;
    if body["stream"] != true {
        return ([(header::CONTENT_TYPE, "application/json")], CHAT_JSON).into_response();
    }
    let s = shape();
    let chunk = |delta: &str, finish: &str| {
        format!("data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":{finish}}}]}}\n\n")
    };
    let mut events = vec![chunk(r#"{"role":"assistant","content":""}"#, "null")];
    for i in 0..s.chunks {
        events.push(chunk(&format!("{{\"content\":\"tok{i} \"}}"), "null"));
    }
    events.push(chunk("{}", "\"stop\""));
    events.push("data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"bench\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":20,\"total_tokens\":29}}\n\n".into());
    events.push("data: [DONE]\n\n".into());
    sse(events, s.interval)
}

async fn messages(body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    pause_if_slow(&body).await;
    if body["stream"] != true {
        return ([(header::CONTENT_TYPE, "application/json")], MESSAGE_JSON).into_response();
    }
    let s = shape();
    let event = |name: &str, data: &str| format!("event: {name}\ndata: {data}\n\n");
    let mut events = vec![
        event("message_start", r#"{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","content":[],"model":"bench","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}"#),
        event("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
    ];
    for i in 0..s.chunks {
        events.push(event("content_block_delta", &format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"tok{i} "}}}}"#)));
    }
    events.push(event("content_block_stop", r#"{"type":"content_block_stop","index":0}"#));
    events.push(event("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}"#));
    events.push(event("message_stop", r#"{"type":"message_stop"}"#));
    sse(events, s.interval)
}

#[tokio::main]
async fn main() {
    // The HTTP stack's own warnings (an h2 peer past a flood limit, say) reach the log.
    tracing_subscriber::fmt().with_max_level(tracing_subscriber::filter::LevelFilter::WARN).with_writer(std::io::stderr).init();
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(9100);
    let app = Router::new().route("/v1/chat/completions", post(chat)).route("/v1/messages", post(messages));
    // A deep accept backlog: thousands of connections arrive at once in the in-flight scenario.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind(([127, 0, 0, 1], port).into()).expect("binding the mock's port");
    let listener = socket.listen(16384).unwrap();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http2().max_concurrent_streams(100_000);
    let builder = std::sync::Arc::new(builder);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await; // out of descriptors: let some close
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (builder, service) = (builder.clone(), TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            // An HTTP/2 connection ended by an error ends every request on it: say why (an
            // HTTP/1.1 client hanging up between requests is no news).
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), service).await
                && format!("{e:?}").contains("Http2")
            {
                eprintln!("mock: an HTTP/2 connection ended: {e:?}");
            }
        });
    }
}
