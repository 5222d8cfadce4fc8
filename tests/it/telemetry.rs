//! OTLP traces from the real binary to a receiver on loopback speaking OTLP/HTTP protobuf: the
//! client's `traceparent` is continued, sent upstream, and the attempt's span carries the
//! GenAI attributes and the usage that arrived with the answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::sync::Notify;

use crate::support::binary::Binary;
use crate::support::{KEY, MockUpstream};

const TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN: &str = "b7ad6b7169203331";
/// Spans are batched for half a second; this only stops a hang.
const GUARD: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Received {
    spans: Mutex<Vec<Span>>,
    arrived: Notify,
}

async fn collector() -> (String, Arc<Received>) {
    let received = Arc::new(Received::default());
    let app = Router::new()
        .route(
            "/v1/traces",
            post(|State(r): State<Arc<Received>>, body: Bytes| async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                let spans = request.resource_spans.into_iter().flat_map(|r| r.scope_spans).flat_map(|s| s.spans);
                r.spans.lock().unwrap().extend(spans);
                r.arrived.notify_waiters();
            }),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<AnyValue> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| a.value.clone()).and_then(|v| v.value)
}

/// Waits until spans named `names` of the client's trace have arrived.
async fn spans_of_trace(received: &Received, names: &[&str]) -> Vec<Span> {
    tokio::time::timeout(GUARD, async {
        loop {
            let arrived = received.arrived.notified();
            let spans: Vec<Span> =
                received.spans.lock().unwrap().iter().filter(|s| hex(&s.trace_id) == TRACE_ID).cloned().collect();
            if names.iter().all(|n| spans.iter().any(|s| s.name == *n)) {
                return spans;
            }
            arrived.await;
        }
    })
    .await
    .expect("the spans reach the collector")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_continues_the_clients_trace_upstream_and_exports_its_attempt_with_genai_attributes() {
    let (endpoint, received) = collector().await;
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "telemetry: {{otlp_endpoint: '{endpoint}', service_name: switchyard-test}}\n\
         sources:\n  - {{name: up, base_url: '{}', models: [{{name: m, upstream: 'say:traced answer'}}]}}\n\
         prices: [{{model: m, input: '2', output: '8'}}]\n",
        mock.url
    );
    let gateway = Binary::start(dir.path(), &config);
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.url))
        .bearer_auth(KEY)
        .header("traceparent", format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"))
        .json(&serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

    // Upstream, the same trace under the attempt's own span.
    let sent = mock.state.requests().pop().unwrap();
    let upstream = sent.headers["traceparent"].to_str().unwrap().to_string();
    let parts: Vec<&str> = upstream.split('-').collect();
    assert_eq!((parts[0], parts[1], parts[3]), ("00", TRACE_ID, "01"), "{upstream}");
    assert_ne!(parts[2], CLIENT_SPAN, "the upstream's parent is the gateway's span");

    let spans = spans_of_trace(&received, &["request", "chat m"]).await;
    let request = spans.iter().find(|s| s.name == "request").unwrap();
    assert_eq!(hex(&request.parent_span_id), CLIENT_SPAN, "the request span continues the client's");
    let attempt = spans.iter().find(|s| s.name == "chat m").unwrap();
    assert_eq!(attempt.parent_span_id, request.span_id, "the attempt is a child of the request");
    assert_eq!(hex(&attempt.span_id), parts[2], "upstream saw the attempt's span");
    let text = |key: &str| match attribute(attempt, key) {
        Some(AnyValue::StringValue(s)) => s,
        other => panic!("{key}: {other:?}"),
    };
    let number = |key: &str| match attribute(attempt, key) {
        Some(AnyValue::IntValue(n)) => n,
        other => panic!("{key}: {other:?}"),
    };
    assert_eq!(text("gen_ai.operation.name"), "chat");
    assert_eq!(text("gen_ai.request.model"), "m");
    assert_eq!(text("gen_ai.response.model"), "say:traced answer");
    assert_eq!(text("gen_ai.provider.name"), "openai-chat");
    assert_eq!(text("switchyard.source"), "up");
    assert_eq!(text("gen_ai.response.finish_reasons"), "stop");
    assert_eq!(number("gen_ai.usage.input_tokens"), 10, "the mock's prompt tokens");
    assert_eq!(number("gen_ai.usage.output_tokens"), ("traced answer".len() / 4) as i64);
    // 10 in × $2 + 3 out × $8 per 1M.
    assert_eq!(attribute(attempt, "switchyard.cost_usd"), Some(AnyValue::DoubleValue(0.000044)));
}
