//! Real streaming: events reach the client as the upstream sends them, a client hang-up
//! cancels the upstream, silence and truncation end in an error event, never a clean finish.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use crate::support::mock::sse_events;
use crate::support::{MockUpstream, TestGateway, chat_body, config_with, mock_source};

/// Reads a streaming response one SSE event at a time.
struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    fn new(response: reqwest::Response) -> Self {
        SseReader { response, buffer: String::new() }
    }

    async fn next_event(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                return Some(event);
            }
            let chunk = self.response.chunk().await.expect("body reads")?;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

/// A bound on waits that would otherwise hang a broken build forever.
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test]
async fn each_event_is_forwarded_before_the_next_is_produced() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config_with(&mock_source(&mock, &["gated"]))).await;
    let events = sse_events();
    let mut reader = SseReader::new(gw.chat(chat_body("gated", true)).await);

    // The upstream has sent only its first event: the client must already have it.
    assert_eq!(within("first event", reader.next_event()).await.as_deref(), Some(events[0].as_str()));
    for expected in &events[1..] {
        mock.state.gate.add_permits(1);
        assert_eq!(within("next event", reader.next_event()).await.as_deref(), Some(expected.as_str()));
    }
    assert_eq!(within("end", reader.next_event()).await, None);
}

#[tokio::test]
async fn a_client_hang_up_cancels_the_upstream_request() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config_with(&mock_source(&mock, &["gated", "fixture"]))).await;
    let mut reader = SseReader::new(gw.chat(chat_body("gated", true)).await);
    within("first event", reader.next_event()).await.unwrap();
    assert!(!mock.state.hung_up_flag.load(Ordering::SeqCst));
    drop(reader);
    within("upstream sees the hang-up", mock.state.hung_up.notified()).await;
    assert!(mock.state.hung_up_flag.load(Ordering::SeqCst));

    // The instance went back to the pool and the gateway keeps serving.
    let adapter = gw.gateway.plugins.adapter(&switchyard::config::AdapterName::new("openai")).unwrap();
    assert_eq!(adapter.pool_stats().idle, 1, "the stream's instance is back in the pool");
    let response = gw.chat(chat_body("fixture", false)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(adapter.pool_stats().idle, 1, "and was reused");
}

fn error_event(event: &str) -> Value {
    let json = event.strip_prefix("data: ").expect("an SSE data line").trim_end();
    let value: Value = serde_json::from_str(json).unwrap();
    assert!(value.get("error").is_some(), "expected an error event, got {event}");
    value
}

#[tokio::test]
async fn a_silent_upstream_is_cut_by_the_idle_timeout_with_an_error_event() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config_with(&mock_source(&mock, &["silent"]))).await;
    let mut reader = SseReader::new(gw.chat(chat_body("silent", true)).await);
    assert_eq!(within("first", reader.next_event()).await.unwrap(), sse_events()[0]);
    let error = error_event(&within("error event", reader.next_event()).await.unwrap());
    assert_eq!(error["error"]["code"], "upstream_timeout");
    assert!(error["error"]["message"].as_str().unwrap().contains("next stream event"));
    assert_eq!(within("end", reader.next_event()).await, None, "no [DONE] after a failure");
}

#[tokio::test]
async fn a_stream_cut_midway_ends_in_an_error_not_a_clean_finish() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config_with(&mock_source(&mock, &["cut"]))).await;
    let body = gw.chat(chat_body("cut", true)).await.text().await.unwrap();
    let events: Vec<&str> = body.split_inclusive("\n\n").collect();
    assert_eq!(events.len(), 4, "{body}");
    assert_eq!(events[..3].concat(), sse_events()[..3].concat());
    let error = error_event(events[3]);
    assert_eq!(error["error"]["code"], "stream_truncated");
    assert!(!body.contains("data: [DONE]"));
    let health = gw.gateway.scheduler.health();
    assert_eq!(health.len(), 1, "too late to fail over, but the source cools for the next request");
    assert_eq!((health[0].0.to_string(), health[0].1.failures), ("mock/cut".to_string(), 1));
}
