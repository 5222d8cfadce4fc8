//! HTTP/2 on both hops: a client's requests share one connection to the gateway (up to
//! `server.http2_max_streams`), and a source with `http_version: http2` gets them all on one h2c
//! connection — thousands in flight without a descriptor each.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use futures::StreamExt;
use futures::future::join_all;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::support::gateway::{KEY, TestGateway, chat_body, config_with};
use crate::support::mock::{CHAT_JSON, CHAT_SSE};
use crate::support::{assemble, openai_events};

/// More requests at once than hyper's default of 200 streams a connection.
const AT_ONCE: usize = 300;

/// An OpenAI upstream that speaks only h2c, counts its connections, and holds every request
/// until `expected` are in at once, so an answer proves they were all in flight together.
struct H2Upstream {
    url: String,
    connections: Arc<AtomicUsize>,
    http2_requests: Arc<AtomicUsize>,
}

impl H2Upstream {
    async fn start(expected: usize) -> H2Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let (connections, http2_requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (counted, versions) = (connections.clone(), http2_requests.clone());
        let arrived = Arc::new(watch::channel(0usize).0);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let (arrived, versions) = (arrived.clone(), versions.clone());
                let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let (arrived, versions) = (arrived.clone(), versions.clone());
                    async move {
                        if request.version() == hyper::Version::HTTP_2 {
                            versions.fetch_add(1, Ordering::SeqCst);
                        }
                        let body = request.into_body().collect().await.unwrap().to_bytes();
                        let streamed = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["stream"] == true;
                        let mut all_in = arrived.subscribe();
                        arrived.send_modify(|n| *n += 1);
                        all_in.wait_for(|n| *n >= expected).await.unwrap();
                        let (kind, body) =
                            if streamed { ("text/event-stream", CHAT_SSE) } else { ("application/json", CHAT_JSON) };
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder().header("content-type", kind).body(Body::from(body)).unwrap(),
                        )
                    }
                });
                tokio::spawn(async move {
                    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    builder.max_concurrent_streams(10_000);
                    let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        H2Upstream { url, connections, http2_requests }
    }
}

#[tokio::test]
async fn hundreds_of_requests_share_one_client_connection_and_one_upstream_connection() {
    let upstream = H2Upstream::start(AT_ONCE).await;
    let gw = TestGateway::start(&config_with(&format!(
        "server: {{http2_max_streams: 500}}
sources:
  - name: h2
    base_url: {}
    stream_whole_answers: false
    http_version: http2
    max_concurrent: 1000
    models: [{{name: m}}]
",
        upstream.url
    )))
    .await;
    // One client connection, spoken in h2c as gRPC-style clients and load balancers do.
    let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let url = format!("{}/v1/chat/completions", gw.url);
    let requests = (0..AT_ONCE).map(|i| {
        let streamed = i % 10 == 0;
        client.post(&url).bearer_auth(KEY).json(&chat_body("m", streamed)).send()
    });
    // The upstream answers only once all are in: a bound cap on either hop would stall here.
    let answers = tokio::time::timeout(Duration::from_secs(60), join_all(requests))
        .await
        .expect("every request reached the upstream at once");
    let expected: serde_json::Value = serde_json::from_str(CHAT_JSON).unwrap();
    for (i, answer) in answers.into_iter().enumerate() {
        let answer = answer.unwrap();
        assert_eq!(answer.version(), reqwest::Version::HTTP_2);
        assert_eq!(answer.status(), 200, "request {i}");
        let text = answer.text().await.unwrap();
        if i % 10 == 0 {
            let (chunks, done) = openai_events(&text);
            assert!(done, "request {i} ends with [DONE]: {text}");
            assert_eq!(assemble(&chunks).content, "Hello there!", "request {i}");
        } else {
            let body: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["choices"][0]["message"], expected["choices"][0]["message"], "request {i}");
        }
    }
    assert_eq!(upstream.connections.load(Ordering::SeqCst), 1, "all on one upstream connection");
    assert_eq!(upstream.http2_requests.load(Ordering::SeqCst), AT_ONCE);
}

#[tokio::test]
async fn a_source_left_on_auto_speaks_http1_to_a_plain_http_upstream() {
    // The same h2c-only upstream cannot be reached in HTTP/1.1: the attempt fails, which shows
    // `auto` does not guess h2c (most plain-HTTP upstreams, Ollama or llama.cpp, speak only 1.1).
    let upstream = H2Upstream::start(1).await;
    let gw = TestGateway::start(&config_with(&format!(
        "sources:\n  - name: plain\n    base_url: {}\n    stream_whole_answers: false\n    models: [{{name: m}}]\n",
        upstream.url
    )))
    .await;
    let answer = gw.chat(chat_body("m", false)).await;
    assert_eq!(answer.status(), 502, "{}", answer.text().await.unwrap());
    assert_eq!(upstream.http2_requests.load(Ordering::SeqCst), 0);
}

/// An h2c upstream on loopback that speaks with `serve` on each connection: its URL and how many
/// connections it has taken.
async fn h2c_upstream<F, Fut>(serve: F) -> (String, Arc<AtomicUsize>)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(stream));
        }
    });
    (url, connections)
}

/// An h2c upstream that gracefully closes every connection on its first request (GOAWAY, then
/// that request's answer), as an upstream does when it restarts or rotates connections.
async fn closing_after_each_answer() -> (String, Arc<AtomicUsize>) {
    h2c_upstream(|stream| async move {
        let (arrived, closing) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
        let (notify, closed) = (arrived.clone(), closing.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let (notify, closed) = (notify.clone(), closed.clone());
            async move {
                let body = request.into_body().collect().await.unwrap().to_bytes();
                let streamed = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["stream"] == true;
                let (kind, body) =
                    if streamed { ("text/event-stream", CHAT_SSE) } else { ("application/json", CHAT_JSON) };
                // The GOAWAY goes out before the answer, so the gateway knows it when answered.
                notify.notify_one();
                closed.notified().await;
                Ok::<_, std::convert::Infallible>(
                    hyper::Response::builder().header("content-type", kind).body(Body::from(body)).unwrap(),
                )
            }
        });
        let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        tokio::select! {
            _ = connection.as_mut() => return,
            () = arrived.notified() => connection.as_mut().graceful_shutdown(),
        }
        closing.notify_one();
        let _ = connection.await;
    })
    .await
}

#[tokio::test]
async fn a_closed_upstream_connection_is_replaced_for_the_next_request() {
    let (url, connections) = closing_after_each_answer().await;
    let gw = TestGateway::start(&config_with(&format!(
        "sources:\n  - name: h2\n    base_url: {url}\n    stream_whole_answers: false\n    http_version: http2\n    models: [{{name: m}}]\n"
    )))
    .await;
    for round in 1..=3 {
        let answer = gw.chat(chat_body("m", round == 2)).await;
        let status = answer.status();
        let text = answer.text().await.unwrap();
        assert_eq!(status, 200, "round {round}: {text}");
        if round == 2 {
            assert_eq!(assemble(&openai_events(&text).0).content, "Hello there!");
        } else {
            let body: serde_json::Value = serde_json::from_str(&text).unwrap();
            let expected: serde_json::Value = serde_json::from_str(CHAT_JSON).unwrap();
            assert_eq!(body["choices"][0]["message"], expected["choices"][0]["message"], "round {round}");
        }
    }
    assert_eq!(connections.load(Ordering::SeqCst), 3, "one connection per answer, each opened anew");
}

#[tokio::test]
async fn an_unreachable_h2c_upstream_is_a_transport_error_naming_the_connect() {
    // A port nothing listens on: bound, then let go.
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let gw = TestGateway::start(&config_with(&format!(
        "sources:\n  - name: h2\n    base_url: http://127.0.0.1:{port}/v1\n    stream_whole_answers: false\n    http_version: http2\n    models: [{{name: m}}]\n"
    )))
    .await;
    let answer = gw.chat(chat_body("m", false)).await;
    assert_eq!(answer.status(), 502);
    let body: serde_json::Value = answer.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("connecting to 127.0.0.1:{port} failed")), "{message}");
    assert!(!message.contains("sk-"), "no key in the message: {message}");
}

/// An h2c upstream that sends the first part of every answer, then resets the stream
/// (`RST_STREAM`), as an upstream does when its model server dies mid-answer: a stream once
/// `reset` is notified (so its first chunk is known to have arrived), a whole answer at once.
async fn resetting_mid_answer(reset: Arc<tokio::sync::Notify>) -> (String, Arc<AtomicUsize>) {
    h2c_upstream(move |stream| {
        let reset = reset.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let reset = reset.clone();
            async move {
                let body = request.into_body().collect().await.unwrap().to_bytes();
                let streamed = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["stream"] == true;
                let (kind, whole) =
                    if streamed { ("text/event-stream", CHAT_SSE) } else { ("application/json", CHAT_JSON) };
                let first =
                    if streamed { &whole[..whole.find("\n\n").unwrap() + 2] } else { &whole[..whole.len() / 2] };
                let died = futures::stream::once(async move {
                    if streamed {
                        reset.notified().await;
                    }
                    Err::<bytes::Bytes, _>(std::io::Error::other("the model server died"))
                });
                let parts = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(first))]).chain(died);
                Ok::<_, std::convert::Infallible>(
                    hyper::Response::builder().header("content-type", kind).body(Body::from_stream(parts)).unwrap(),
                )
            }
        });
        async move {
            let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        }
    })
    .await
}

#[tokio::test]
async fn an_answer_reset_mid_way_on_the_h2c_connection_is_a_failure_not_a_success() {
    let reset = Arc::new(tokio::sync::Notify::new());
    let (url, connections) = resetting_mid_answer(reset.clone()).await;
    let gw = TestGateway::start(&config_with(&format!(
        "sources:\n  - name: h2\n    base_url: {url}\n    stream_whole_answers: false\n    http_version: http2\n    models: [{{name: m}}, {{name: n}}]\n"
    )))
    .await;
    // A stream: the first chunk passes; after the reset, an error event and no `[DONE]`.
    let mut answer = gw.chat(chat_body("m", true)).await;
    assert_eq!(answer.status(), 200);
    let mut text = String::from_utf8(answer.chunk().await.unwrap().unwrap().to_vec()).unwrap();
    assert!(text.contains("chat.completion.chunk"), "{text}");
    reset.notify_one();
    while let Some(more) = answer.chunk().await.unwrap() {
        text.push_str(std::str::from_utf8(&more).unwrap());
    }
    assert!(text.contains("\"error\""), "an error event ends the stream: {text}");
    assert!(!text.contains("[DONE]"), "a cut stream is not reported complete: {text}");
    // A whole answer (another model: the cut stream has cooled `h2/m`): half a body is a
    // transport failure, not a 200.
    let answer = gw.chat(chat_body("n", false)).await;
    let status = answer.status();
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(status, 502, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("stream error"), "{body}");
    // A reset ends one stream, not the connection: both answers came on one.
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}
