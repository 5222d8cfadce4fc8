//! The fault scenarios S01–S16 of issue 12: a primary and a fallback source (openai adapter) in
//! front of scriptable faulty upstreams, each scenario ending the way the issue requires.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use switchyard::scheduler::ManualClock;
use tokio::time::Instant;

use crate::support::faulty::{Answer, Behaviour, DONE, FaultyUpstream, StreamEnd, completion_body, error_body};
use crate::support::{TestGateway, assemble, chat_body, config_with, openai_events};

const PRIMARY: Answer =
    Answer { model: "primary-model", text: "Hello from the primary.", prompt_tokens: 9, completion_tokens: 5 };
const FALLBACK: Answer =
    Answer { model: "fallback-model", text: "Hello from the fallback.", prompt_tokens: 21, completion_tokens: 8 };

const T0: u64 = 1_800_000_000_000;
const ADMIN: &str = "adm-faults-token-0001";
/// Keeps a failing source in the rotation, so each request tries the primary again.
const NEVER_COOL: &str = "cooldown: {failure_threshold: 1000}\n";
/// The longest any request may take before the test gives up on the gateway.
const GUARD: Duration = Duration::from_secs(10);

/// A config where `primary` and `fallback` serve model `shared`, tried in that order; `top` adds
/// top-level lines, `primary_settings` entries (`key: value`) to the primary source.
fn pair_config(primary: &FaultyUpstream, fallback: &FaultyUpstream, top: &str, primary_settings: &[&str]) -> String {
    let settings: String = primary_settings.iter().map(|s| format!(", {s}")).collect();
    config_with(&format!(
        "channel_selection: order\n{top}sources:\n  - {{name: primary, base_url: \"{}\", models: [{{name: shared}}]{settings}}}\n  - {{name: fallback, base_url: \"{}\", models: [{{name: shared}}]}}\n",
        primary.url, fallback.url
    ))
}

async fn within<T>(limit: Duration, what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, f).await.unwrap_or_else(|_| panic!("no answer within {limit:?}: {what}"))
}

/// A non-streaming request for `shared`: status and JSON body.
async fn ask_json(gw: &TestGateway) -> (StatusCode, Value) {
    within(GUARD, "a JSON answer", async {
        let response = gw.chat(chat_body("shared", false)).await;
        (response.status(), response.json().await.unwrap())
    })
    .await
}

/// A streaming request for `shared`, read to its end: its JSON events and whether `[DONE]` came.
async fn ask_stream(gw: &TestGateway) -> (Vec<Value>, bool) {
    within(GUARD, "a whole stream", async {
        let response = gw.chat(chat_body("shared", true)).await;
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(status, 200, "{body}");
        openai_events(&body)
    })
    .await
}

/// The upstream model of a successful answer: whose answer the client got.
async fn served_by(gw: &TestGateway, stream: bool) -> String {
    let model = if stream {
        let (events, done) = ask_stream(gw).await;
        assert!(done, "a complete stream: {events:?}");
        events[0]["model"].clone()
    } else {
        let (status, body) = ask_json(gw).await;
        assert_eq!(status, 200, "{body}");
        body["model"].clone()
    };
    model.as_str().unwrap().to_string()
}

/// The error event that ends a stream which failed after its first chunk: no finish_reason
/// before it, no `[DONE]` after it.
fn error_event(events: &[Value], done: bool) -> &Value {
    assert!(!done, "a failed stream must not end with [DONE]: {events:?}");
    assert_eq!(assemble(events).finish, None, "no finish_reason in a failed stream: {events:?}");
    let last = events.last().expect("the stream has events");
    assert!(last["error"].is_object(), "the stream ends with an error event, not {last}");
    last
}

/// An error in OpenAI's format: `{"error": {"message", "type", "param", "code"}}`.
fn assert_openai_error(body: &Value) {
    let error = &body["error"];
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(error["type"].is_string(), "{body}");
    assert!(error.get("param").is_some() && error.get("code").is_some(), "{body}");
}

/// How long the gateway spent on the primary's attempt `n` before it turned to the fallback.
fn time_on_primary(primary: &FaultyUpstream, fallback: &FaultyUpstream, n: usize) -> Duration {
    fallback.arrivals()[n].at - primary.arrivals()[n].at
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

fn rate_limited(retry_after: Option<&str>) -> Behaviour {
    let body = error_body(
        "Rate limit reached for primary-model on requests per min (RPM): Limit 3, Used 3, Requested 1.",
        Some("requests"),
        None,
        Some("rate_limit_exceeded"),
    );
    let headers = retry_after.map(|s| ("retry-after".to_string(), s.to_string())).into_iter().collect();
    Behaviour::Json { status: 429, headers, body }
}

fn server_error(status: u16) -> Behaviour {
    let message = "The server had an error while processing your request. Sorry about that!";
    Behaviour::json(status, error_body(message, Some("server_error"), None, None))
}

#[tokio::test]
async fn s01_retry_after_is_honoured() {
    let primary = FaultyUpstream::start(|a| if a.number == 0 { rate_limited(Some("2")) } else { PRIMARY.to(a) }).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let clock = Arc::new(ManualClock::at(T0));
    // The source's own 429 rest is shorter than the Retry-After: the Retry-After decides.
    let yaml = pair_config(&primary, &fallback, "cooldown: {rate_limit_ms: 1000}\n", &[]);
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &yaml, clock.clone()).await;

    assert_eq!(served_by(&gw, false).await, FALLBACK.model, "the primary answered 429");
    for _ in 0..7 {
        clock.advance(Duration::from_millis(250));
        assert_eq!(served_by(&gw, false).await, FALLBACK.model, "the fallback serves meanwhile");
    }
    assert_eq!(primary.attempts(), 1, "the primary is not retried within Retry-After's 2 s");
    clock.advance(Duration::from_millis(250));
    assert_eq!(served_by(&gw, false).await, PRIMARY.model, "back on the primary once the 2 s have passed");
}

#[tokio::test]
async fn s02_persistent_429_is_tried_at_most_four_times() {
    let primary = FaultyUpstream::start(|_| rate_limited(None)).await;
    let fallback = FaultyUpstream::start(|_| rate_limited(None)).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &[])).await;

    let (status, body) = ask_json(&gw).await;
    assert!([429, 503].contains(&status.as_u16()), "{status}: {body}");
    assert_openai_error(&body);
    let attempts = primary.attempts() + fallback.attempts();
    assert!(attempts <= 4, "{attempts} upstream attempts for one request");
}

#[tokio::test]
async fn s03_one_500_then_fine_succeeds() {
    let primary = FaultyUpstream::start(|a| if a.number == 0 { server_error(500) } else { PRIMARY.to(a) }).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &[])).await;

    let (status, body) = ask_json(&gw).await;
    assert_eq!(status, 200, "{body}");
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!([PRIMARY.text, FALLBACK.text].contains(&content), "{body}");
}

#[tokio::test]
async fn s04_persistent_503_ends_in_a_clear_error() {
    let primary = FaultyUpstream::start(|_| server_error(503)).await;
    let fallback = FaultyUpstream::start(|_| server_error(503)).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &[])).await;

    let (status, body) = ask_json(&gw).await;
    assert_eq!(status, 503, "{body}");
    assert_openai_error(&body);
    let attempts = primary.attempts() + fallback.attempts();
    assert!(attempts <= 6, "{attempts} upstream attempts for one request");
}

#[tokio::test]
async fn s05_a_reset_before_the_headers_fails_over() {
    let primary = FaultyUpstream::start(|_| Behaviour::ResetBeforeHeaders).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, NEVER_COOL, &[])).await;

    assert_eq!(served_by(&gw, false).await, FALLBACK.model);
    assert_eq!(served_by(&gw, true).await, FALLBACK.model);
    assert_eq!(primary.attempts(), 2, "each request tried the primary first");
}

#[tokio::test]
async fn s06_a_silent_upstream_is_bounded_by_the_timeout_of_its_kind() {
    let primary = FaultyUpstream::start(|_| Behaviour::NeverAnswer).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let settings = ["first_byte_timeout_seconds: 0.3", "timeout_seconds: 1"];
    let gw = TestGateway::start(&pair_config(&primary, &fallback, NEVER_COOL, &settings)).await;

    assert_eq!(served_by(&gw, true).await, FALLBACK.model);
    // Measured between arrivals at the two mocks: the gateway's own clock started a little earlier.
    let waited = time_on_primary(&primary, &fallback, 0);
    assert!(
        secs(0.25) <= waited && waited < secs(1.0),
        "a stream waits first_byte_timeout_seconds (0.3 s) for its head; waited {waited:?}"
    );
    assert_eq!(served_by(&gw, false).await, FALLBACK.model);
    let waited = time_on_primary(&primary, &fallback, 1);
    assert!(
        secs(0.25) <= waited && waited < secs(1.0),
        "a whole answer is asked as a stream: its silence is bounded by first_byte_timeout_seconds (0.3 s) too; waited {waited:?}"
    );

    // Asked as sent (`stream_whole_answers: false`): the whole request's timeout_seconds.
    let settings = ["first_byte_timeout_seconds: 0.3", "timeout_seconds: 1", "stream_whole_answers: false"];
    let gw = TestGateway::start(&pair_config(&primary, &fallback, NEVER_COOL, &settings)).await;
    assert_eq!(served_by(&gw, false).await, FALLBACK.model);
    let waited = time_on_primary(&primary, &fallback, 2);
    assert!(
        secs(0.95) <= waited && waited < secs(2.5),
        "a non-streaming request sent as such waits timeout_seconds (1 s) for its whole answer; waited {waited:?}"
    );
}

#[tokio::test]
async fn s07_a_head_without_events_fails_over_at_the_first_byte_timeout() {
    let primary =
        FaultyUpstream::start(|_| Behaviour::HeadThenDelay { delay: secs(1.5), events: PRIMARY.events() }).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let settings = ["first_byte_timeout_seconds: 0.3", "idle_timeout_seconds: 5", "timeout_seconds: 5"];
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &settings)).await;

    assert_eq!(
        served_by(&gw, true).await,
        FALLBACK.model,
        "the primary's first event comes 1.5 s after its head, past first_byte_timeout_seconds (0.3 s)"
    );
    let waited = time_on_primary(&primary, &fallback, 0);
    // Measured between arrivals at the two mocks: the gateway's own clock started a little earlier.
    assert!(secs(0.25) <= waited && waited < secs(1.0), "failed over after {waited:?}");
}

#[tokio::test]
async fn s08_a_stream_cut_after_some_tokens_is_never_a_clean_success() {
    let cut = PRIMARY.events()[..3].to_vec();
    let primary = FaultyUpstream::start(move |_| Behaviour::Sse { events: cut.clone(), end: StreamEnd::Close }).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &[])).await;

    let (events, done) = ask_stream(&gw).await;
    assert_eq!(events[0]["model"], PRIMARY.model, "the primary's first chunk reached the client");
    error_event(&events, done);
}

#[tokio::test]
async fn s09_a_stall_mid_stream_is_cut_by_the_idle_timeout() {
    let stalled = PRIMARY.events()[..3].to_vec();
    let primary = FaultyUpstream::start(move |a| match a.number {
        0 => Behaviour::Sse { events: stalled.clone(), end: StreamEnd::Stall },
        _ => PRIMARY.to(a),
    })
    .await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &["idle_timeout_seconds: 0.3"])).await;

    let started = Instant::now();
    let (events, done) = ask_stream(&gw).await;
    let took = started.elapsed();
    assert_eq!(error_event(&events, done)["error"]["code"], "upstream_timeout");
    assert!(secs(0.25) <= took && took < secs(2.3), "cut {took:?} after the request; idle_timeout_seconds is 0.3 s");

    let (status, body) = ask_json(&gw).await;
    assert_eq!(status, 200, "the gateway serves the next request: {body}");
}

#[tokio::test]
async fn s10_a_malformed_chunk_ends_in_an_error_event() {
    let mut malformed = PRIMARY.events();
    malformed.insert(2, "data: {not json\n\n".to_string());
    let primary = FaultyUpstream::start(move |a| match a.number {
        0 => Behaviour::Sse { events: malformed.clone(), end: StreamEnd::Close },
        _ => PRIMARY.to(a),
    })
    .await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &[])).await;

    let (events, done) = ask_stream(&gw).await;
    error_event(&events, done);
    let (status, body) = ask_json(&gw).await;
    assert_eq!(status, 200, "the gateway is up and serving: {body}");
}

#[tokio::test]
async fn s11_finish_reason_then_close_without_done_finishes_with_usage() {
    let mut without_done = PRIMARY.events();
    assert_eq!(without_done.pop().as_deref(), Some(DONE));
    let primary =
        FaultyUpstream::start(move |_| Behaviour::Sse { events: without_done.clone(), end: StreamEnd::Close }).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let top = format!("admin_token: {ADMIN}\n");
    let gw = TestGateway::start(&pair_config(&primary, &fallback, &top, &[])).await;

    let (events, done) = within(Duration::from_secs(8), "the stream's end", ask_stream(&gw)).await;
    let answer = assemble(&events);
    assert!(done, "a finished stream: {events:?}");
    assert_eq!((answer.content.as_str(), answer.finish.as_deref()), (PRIMARY.text, Some("stop")));
    assert_eq!(answer.usage, Some(json_of(&PRIMARY.usage())));

    let logs = gw.admin_json(ADMIN, "/admin/api/logs?source=primary").await;
    let row = &logs["rows"][0];
    assert_eq!(logs["total"], 1, "{logs}");
    assert_eq!(
        (row["status"].as_u64(), row["tokens_in"].as_u64(), row["tokens_out"].as_u64()),
        (Some(200), Some(PRIMARY.prompt_tokens), Some(PRIMARY.completion_tokens)),
        "the usage is in the books: {row}"
    );
}

#[tokio::test]
async fn s12_context_length_exceeded_is_passed_on_with_its_code() {
    let message = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.";
    let body = error_body(message, Some("invalid_request_error"), Some("messages"), Some("context_length_exceeded"));
    let primary = FaultyUpstream::start(move |_| Behaviour::json(400, body.clone())).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &[])).await;

    let (status, body) = ask_json(&gw).await;
    assert_eq!((primary.attempts(), fallback.attempts()), (1, 0), "exactly one upstream attempt");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["message"], message);
    assert_eq!(body["error"]["code"], "context_length_exceeded", "{body}");
}

#[tokio::test]
async fn s13_content_filter_refusals_are_passed_on_without_retry() {
    let message = "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.";
    let refusal = error_body(message, None, Some("prompt"), Some("content_filter"));
    let primary = FaultyUpstream::start(move |a| match a.number {
        0 => Behaviour::json(200, completion_body(PRIMARY.model, None, "content_filter", &PRIMARY.usage())),
        _ => Behaviour::json(400, refusal.clone()),
    })
    .await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &[])).await;

    let (status, body) = ask_json(&gw).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "content_filter");
    assert_eq!((primary.attempts(), fallback.attempts()), (1, 0), "a filtered answer is not retried");

    let (status, body) = ask_json(&gw).await;
    assert_eq!((primary.attempts(), fallback.attempts()), (2, 0), "a refused request is not retried");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["message"], message);
    assert_eq!(body["error"]["code"], "content_filter", "{body}");
}

#[tokio::test]
async fn s14_a_stream_cut_after_its_first_chunk_never_ends_as_a_success() {
    let cut = PRIMARY.events()[..2].to_vec();
    let primary = FaultyUpstream::start(move |_| Behaviour::Sse { events: cut.clone(), end: StreamEnd::Cut }).await;
    let refusal = error_body("Invalid 'messages': empty.", Some("invalid_request_error"), Some("messages"), None);
    let fallback = FaultyUpstream::start(move |_| Behaviour::json(400, refusal.clone())).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, "", &[])).await;

    let (events, done) = ask_stream(&gw).await;
    assert_eq!(events[0]["model"], PRIMARY.model, "the primary's first chunk reached the client");
    error_event(&events, done);
}

#[tokio::test]
async fn s15_traffic_returns_to_the_primary_within_30_s_of_its_recovery() {
    const OUTAGE_SECS: u32 = 120;
    let down = Arc::new(AtomicBool::new(true));
    let primary = FaultyUpstream::start({
        let down = down.clone();
        move |a| if down.load(Ordering::SeqCst) { server_error(503) } else { PRIMARY.to(a) }
    })
    .await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let clock = Arc::new(ManualClock::at(T0));
    let yaml = pair_config(&primary, &fallback, "", &[]);
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &yaml, clock.clone()).await;

    for second in 0..OUTAGE_SECS {
        assert_eq!(served_by(&gw, false).await, FALLBACK.model, "second {second} of the outage");
        clock.advance(Duration::from_secs(1));
    }
    down.store(false, Ordering::SeqCst);
    let mut back_after = None;
    for second in 0..=30 {
        if served_by(&gw, false).await == PRIMARY.model {
            back_after = Some(second);
            break;
        }
        clock.advance(Duration::from_secs(1));
    }
    assert!(
        back_after.is_some(),
        "after a {OUTAGE_SECS} s outage the recovered primary got no traffic within 30 s ({} attempts in all)",
        primary.attempts()
    );
}

#[tokio::test]
async fn s16_the_answer_is_the_fallbacks_model_and_usage() {
    let primary = FaultyUpstream::start(|_| server_error(503)).await;
    let fallback = FaultyUpstream::healthy(FALLBACK).await;
    let gw = TestGateway::start(&pair_config(&primary, &fallback, NEVER_COOL, &[])).await;

    let (status, body) = ask_json(&gw).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["model"], &body["usage"]), (&Value::from(FALLBACK.model), &json_of(&FALLBACK.usage())));

    let (events, done) = ask_stream(&gw).await;
    assert!(done);
    assert!(events.iter().all(|e| e["model"] == FALLBACK.model), "{events:?}");
    assert_eq!(assemble(&events).usage, Some(json_of(&FALLBACK.usage())));
    assert_eq!(primary.attempts(), 2, "each request tried the primary first");
}
