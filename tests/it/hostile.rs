//! Issue 12's defects 1–11, each proven by sending the bad input for real: hostile upstreams and
//! clients against real sockets, the real built adapters and, where a crash is the risk, the binary.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::config::KeyName;
use switchyard::scheduler::{ManualClock, Period};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::support::binary::Binary;
use crate::support::faulty::{
    Answer, Behaviour, Canned, DONE, FaultyUpstream, StreamEnd, chunk_event, completion_body, error_body, usage_event,
};
use crate::support::gateway::shared_cache;
use crate::support::mock::CLAUDE_MESSAGE;
use crate::support::{KEY, MockUpstream, TestGateway, assemble, chat_body, config_with, guest_wasm, openai_events};

const ADMIN: &str = "adm-hostile-token-0001";
/// The key with a token quota, as `payer`.
const PAYER: &str = "sk-hostile-payer-key-0002";
/// The longest any one exchange may take before the test gives up on the gateway.
const GUARD: Duration = Duration::from_secs(10);
/// Keeps a failing source in the rotation, so the next request reaches it again.
const NEVER_COOL: &str = "cooldown: {failure_threshold: 1000}\n";

const ANSWER: Answer =
    Answer { model: "upstream-model", text: "Four score and seven years ago.", prompt_tokens: 9, completion_tokens: 5 };

async fn within<T>(limit: Duration, what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, f).await.unwrap_or_else(|_| panic!("not within {limit:?}: {what}"))
}

/// A config with `tester` (every model, no quota), one key per `(name, secret, token_quota)`
/// (every model, a lifetime quota), the admin token, and `rest` (settings, `sources:`...).
fn config(quota_keys: &[(&str, &str, u64)], rest: &str) -> String {
    let mut keys = format!("keys:\n  - {{name: tester, key: {KEY}, models: ['*']}}\n");
    for (name, secret, quota) in quota_keys {
        keys.push_str(&format!("  - {{name: {name}, key: {secret}, models: ['*'], token_quota: {quota}}}\n"));
    }
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\nadmin_token: {ADMIN}\n{keys}{rest}",
        cache = shared_cache().display()
    )
}

/// Tokens key `name` has used (its quota has no period: a lifetime total).
fn used(gw: &TestGateway, name: &str) -> u64 {
    gw.gateway.scheduler.key_used(&switchyard::domain::Account::Tokens(KeyName::new(name)), Period::Never)
}

async fn chat_as(gw: &TestGateway, secret: &str, body: &Value) -> reqwest::Response {
    let request = reqwest::Client::new().post(format!("{}/v1/chat/completions", gw.url)).bearer_auth(secret).json(body);
    within(GUARD, "an answer", request.send()).await.expect("the gateway answers")
}

/// Status and JSON body of an answer.
async fn status_json(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

async fn admin_get(gw: &TestGateway, path: &str) -> Value {
    gw.admin_json(ADMIN, path).await
}

/// The request-log rows matching `query`, newest first.
async fn log_rows(gw: &TestGateway, query: &str) -> Vec<Value> {
    admin_get(gw, &format!("/admin/api/logs?{query}")).await["rows"].as_array().unwrap().clone()
}

/// Reads a raw connection until the gateway closes it (or resets it).
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    while let Ok(n @ 1..) = stream.read(&mut chunk).await {
        out.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A raw HTTP/1.1 response's status line, head (lowercased) and body (de-chunked).
fn split_response(raw: &str) -> (&str, String, String) {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("not an HTTP response: {raw:?}"));
    let lower = head.to_ascii_lowercase();
    let body = if lower.contains("\r\ntransfer-encoding: chunked") {
        let (mut out, mut rest) = (String::new(), body);
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or_else(|_| panic!("a chunk size: {raw:?}"));
            if size == 0 {
                break;
            }
            out.push_str(&after[..size]);
            rest = after[size..].strip_prefix("\r\n").unwrap_or_default();
        }
        out
    } else {
        body.to_string()
    };
    (head.lines().next().unwrap(), lower, body)
}

fn gateway_addr(gw: &TestGateway) -> String {
    gw.url.trim_start_matches("http://").to_string()
}

// ---------------------------------------------------------------------------------------------
// 1. A tool-call index from an upstream cannot end the process.

#[tokio::test]
async fn no_tool_call_index_an_upstream_sends_can_end_the_process() {
    const EVIL: Answer = Answer { model: "evil-model", text: "", prompt_tokens: 5, completion_tokens: 7 };
    // Upstream model `stream-huge`, `json-max`...: the answer's shape and its tool-call index.
    let upstream = FaultyUpstream::start(|arrival| {
        let model = arrival.body["model"].as_str().unwrap_or_default();
        let (shape, size) = model.split_once('-').expect("shape-size");
        let index = if size == "huge" { "100000000000000" } else { "18446744073709551615" };
        let call = format!(
            r#"{{"index":{index},"id":"call_evil","type":"function","function":{{"name":"f","arguments":"{{}}"}}}}"#
        );
        if shape == "stream" {
            let events = vec![
                chunk_event(EVIL.model, r#"{"role":"assistant","content":null}"#, None),
                chunk_event(EVIL.model, &format!(r#"{{"tool_calls":[{call}]}}"#), None),
                chunk_event(EVIL.model, "{}", Some("tool_calls")),
                usage_event(EVIL.model, &EVIL.usage()),
                DONE.to_string(),
            ];
            Behaviour::Sse { events, end: StreamEnd::Close }
        } else {
            let body = format!(
                r#"{{"id":"chatcmpl-evil","object":"chat.completion","created":1,"model":"{}","choices":[{{"index":0,"message":{{"role":"assistant","content":null,"tool_calls":[{call}]}},"finish_reason":"tool_calls"}}],"usage":{}}}"#,
                EVIL.model,
                EVIL.usage()
            );
            Behaviour::json(200, body)
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Binary::start(
        dir.path(),
        &format!(
            "sources:\n  - {{name: evil, base_url: '{}', models: [{{name: stream-huge}}, {{name: stream-max}}, {{name: json-huge}}, {{name: json-max}}]}}\n",
            upstream.url
        ),
    );

    for model in ["stream-huge", "stream-max"] {
        let response = gateway.chat(&chat_body(model, true)).await;
        assert_eq!(response.status(), 200, "{model}");
        let body = within(GUARD, "the whole stream", response.text()).await.expect("the stream reads to its end");
        assert!(body.ends_with(DONE), "{model}: the client got its whole answer: {body}");
        let index = if model.ends_with("huge") { "100000000000000" } else { "18446744073709551615" };
        assert!(body.contains(&format!(r#""index":{index}"#)), "{model}: the call, index and all, passed on: {body}");
        gateway.assert_alive(model).await;
    }
    for model in ["json-huge", "json-max"] {
        let (status, body) = status_json(gateway.chat(&chat_body(model, false)).await).await;
        assert_eq!(status, 200, "{model}: {body}");
        let call = &body["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["id"], "call_evil", "{model}: {body}");
        let index = if model.ends_with("huge") { 100_000_000_000_000 } else { u64::MAX };
        assert_eq!(call["index"].as_u64(), Some(index), "{model}: the call, index and all, passed on: {body}");
        gateway.assert_alive(model).await;
    }
    assert_eq!(upstream.attempts(), 4);
}

// ---------------------------------------------------------------------------------------------
// 2. A request that breaks the adapter does not cool the source; any accepted body translates.

#[tokio::test]
async fn a_request_that_breaks_the_adapter_fails_alone_and_cools_nothing() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("adapters")).unwrap();
    std::fs::copy(guest_wasm("hostile"), dir.path().join("adapters/hostile.wasm")).unwrap();
    let yaml = config_with(&format!(
        "body_limit_mb: 1\nsandbox: {{memory_mb: 40, cpu_ms_per_call: 300}}\n\
         sources:\n  - {{name: evil, base_url: '{}', adapter: hostile, models: [{{name: grow}}, {{name: ok}}]}}\n",
        mock.url
    ));
    let gw = TestGateway::start_in(dir, &yaml).await;

    // `grow` makes the adapter blow its memory cap while translating the request.
    for attempt in ["first", "second"] {
        let (status, body) = status_json(gw.chat(chat_body("grow", false)).await).await;
        assert_eq!(status, 502, "{attempt} `grow`: tried again, not refused as cooling: {body}");
        assert_eq!(body["error"]["type"], "adapter_error", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("transform-request") && message.contains("memory cap"), "{message}");
        assert!(gw.gateway.scheduler.health().is_empty(), "nothing cools: {:?}", gw.gateway.scheduler.health());
    }
    assert_eq!(gw.chat(chat_body("ok", false)).await.status(), 200, "the source serves everyone else");
}

/// Whether `value` holds the string `needle` anywhere.
fn holds(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(s) => s == needle,
        Value::Array(items) => items.iter().any(|v| holds(v, needle)),
        Value::Object(members) => members.values().any(|v| holds(v, needle)),
        _ => false,
    }
}

/// Sends one image request of `bytes` (the whole JSON body) through the built-in `openai` and
/// `anthropic` adapters with the default sandbox (its memory cap derived from the default
/// body_limit_mb, 32); each must be answered and its upstream get the whole image.
async fn translate_image_request_of(bytes: usize) {
    let openai = FaultyUpstream::healthy(ANSWER).await;
    let anthropic = FaultyUpstream::start(|_| Behaviour::json(200, CLAUDE_MESSAGE.to_string())).await;
    let gw = TestGateway::start(&config_with(&format!(
        "sources:\n  - {{name: oa, base_url: '{}', models: [{{name: big-o, upstream: gpt-4o}}]}}\n  - {{name: an, adapter: anthropic, base_url: '{}', api_key: sk-ant-upstream-0123456789, models: [{{name: big-a, upstream: claude-sonnet-4}}]}}\n",
        openai.url, anthropic.url
    )))
    .await;
    let request = |model: &str, payload: &str| {
        json!({"model": model, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{payload}")}},
        ]}]})
    };
    let overhead = request("big-o", "").to_string().len();
    let payload = "QUJD".repeat((bytes - overhead) / 4);
    for (model, upstream) in [("big-o", &openai), ("big-a", &anthropic)] {
        let body = request(model, &payload).to_string();
        assert!(body.len() <= bytes, "{} bytes", body.len());
        let response = within(
            Duration::from_secs(40),
            model,
            gw.post("/v1/chat/completions").header("content-type", "application/json").body(body).send(),
        )
        .await
        .unwrap();
        let status = response.status();
        assert_eq!(status, 200, "{model}, {bytes} bytes: {}", response.text().await.unwrap());
        let seen = upstream.arrivals().pop().expect("the upstream got the request");
        assert!(
            holds(&seen.body, &payload) || holds(&seen.body, &format!("data:image/png;base64,{payload}")),
            "{model}: the whole image reached the upstream"
        );
    }
}

#[tokio::test]
async fn a_20_mib_image_request_is_translated_with_the_default_sandbox() {
    translate_image_request_of(20 << 20).await;
}

#[tokio::test]
async fn the_largest_request_the_gateway_accepts_is_translated_with_the_default_sandbox() {
    // body_limit_mb is 32 by default: a body just under it must translate too.
    translate_image_request_of((32 << 20) - 1024).await;
}

// ---------------------------------------------------------------------------------------------
// 3. Streams are always metered, whatever the client's stream_options say.

/// An upstream that sends the usage chunk only when asked for it, as OpenAI does.
fn usage_when_asked(arrival: &crate::support::faulty::Arrival) -> Behaviour {
    let mut events = ANSWER.events();
    if arrival.body["stream_options"]["include_usage"] != true {
        events.retain(|e| !e.contains(r#""choices":[]"#));
    }
    Behaviour::Sse { events, end: StreamEnd::Close }
}

fn stream_with(options: Value) -> Value {
    json!({"model": "metered", "stream": true, "stream_options": options,
           "messages": [{"role": "user", "content": "Recite it."}]})
}

#[tokio::test]
async fn a_stream_is_metered_whatever_its_stream_options_say() {
    let upstream = FaultyUpstream::start(usage_when_asked).await;
    let per_answer = ANSWER.prompt_tokens + ANSWER.completion_tokens;
    let gw = TestGateway::start(&config(
        &[("payer", PAYER, 3 * per_answer - 1)],
        &format!("sources:\n  - {{name: counted, base_url: '{}', models: [{{name: metered}}]}}\n", upstream.url),
    ))
    .await;

    for (n, options) in [json!({}), json!({"include_usage": false})].into_iter().enumerate() {
        let response = chat_as(&gw, PAYER, &stream_with(options.clone())).await;
        assert_eq!(response.status(), 200);
        let text = within(GUARD, "the stream", response.text()).await.unwrap();
        let (events, done) = openai_events(&text);
        assert!(done, "{text}");
        assert!(events.iter().all(|e| !e["usage"].is_object()), "{options}: no usage chunk for this client: {text}");
        assert_eq!(assemble(&events).content, ANSWER.text);
        let sent = &upstream.arrivals()[n].body;
        assert_eq!(sent["stream_options"]["include_usage"], true, "{options}: the upstream is asked for usage: {sent}");
        assert_eq!(used(&gw, "payer"), (n as u64 + 1) * per_answer, "{options}: the tokens are counted");
    }
    // A client that asks for the usage chunk still gets it.
    let text = chat_as(&gw, PAYER, &stream_with(json!({"include_usage": true}))).await.text().await.unwrap();
    let (events, done) = openai_events(&text);
    assert!(done);
    assert_eq!(assemble(&events).usage.unwrap()["total_tokens"], per_answer);
    assert_eq!(used(&gw, "payer"), 3 * per_answer);

    let (status, body) = status_json(chat_as(&gw, PAYER, &stream_with(json!({}))).await).await;
    assert_eq!(status, 429, "over its quota: {body}");
    assert_eq!(body["error"]["code"], "key_quota_exceeded", "{body}");
    assert_eq!(upstream.attempts(), 3, "the refused request reached no upstream");
}

#[tokio::test]
async fn an_answer_without_usage_is_charged_an_estimate_marked_as_such() {
    // Never reports usage: no usage chunk in streams, `usage: null` in whole answers.
    let upstream = FaultyUpstream::start(|arrival| {
        if arrival.streaming() {
            let mut events = ANSWER.events();
            events.retain(|e| !e.contains(r#""choices":[]"#));
            Behaviour::Sse { events, end: StreamEnd::Close }
        } else {
            Behaviour::json(200, completion_body(ANSWER.model, Some(ANSWER.text), "stop", "null"))
        }
    })
    .await;
    let gw = TestGateway::start(&config(
        &[("payer", PAYER, 100_000)],
        &format!("sources:\n  - {{name: mute, base_url: '{}', models: [{{name: metered}}]}}\n", upstream.url),
    ))
    .await;
    let response = chat_as(&gw, PAYER, &stream_with(json!({"include_usage": true}))).await;
    assert!(within(GUARD, "the stream", response.text()).await.unwrap().ends_with(DONE));
    let mut whole = stream_with(json!(null));
    whole.as_object_mut().unwrap().retain(|k, _| k != "stream" && k != "stream_options");
    assert_eq!(chat_as(&gw, PAYER, &whole).await.status(), 200);

    let rows = log_rows(&gw, "source=mute").await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let mut charged = 0;
    for row in &rows {
        let (tokens_in, tokens_out) = (row["tokens_in"].as_u64().unwrap(), row["tokens_out"].as_u64().unwrap());
        assert!(tokens_in > 0 && tokens_out > 0, "prompt and answer are estimated: {row}");
        assert_eq!(row["usage_estimated"], true, "{row}");
        charged += tokens_in + tokens_out;
    }
    assert_eq!(used(&gw, "payer"), charged, "the key is charged the estimate");
}

// ---------------------------------------------------------------------------------------------
// 4. A client that hangs up mid-stream is charged for what it read.

#[tokio::test]
async fn a_client_that_hangs_up_mid_stream_is_charged_for_what_it_read() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(
        &[("payer", PAYER, 100_000)],
        &format!("sources:\n  - {{name: mock, base_url: '{}', models: [{{name: gated}}]}}\n", mock.url),
    ))
    .await;
    let mut response = chat_as(&gw, PAYER, &chat_body("gated", true)).await;
    assert_eq!(response.status(), 200);
    // The role chunk comes at once; one permit lets "Hello" through; then the client leaves.
    mock.state.gate.add_permits(1);
    let mut read = String::new();
    while !read.contains("Hello") {
        let chunk = within(GUARD, "the first chunks", response.chunk()).await.unwrap().expect("more of the stream");
        read.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    drop(response);
    // The stream closes its books before it lets go of the upstream.
    within(GUARD, "the gateway hangs up on the upstream", mock.state.hung_up.notified()).await;

    let rows = log_rows(&gw, "source=mock").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!((row["status"].as_u64(), row["error"].as_str()), (Some(499), Some("client_closed")), "{row}");
    let (tokens_in, tokens_out) = (row["tokens_in"].as_u64().unwrap(), row["tokens_out"].as_u64().unwrap());
    assert!(tokens_in > 0 && tokens_out > 0, "what was generated is charged: {row}");
    assert_eq!(row["usage_estimated"], true, "no usage came before the hang-up: {row}");
    assert_eq!(used(&gw, "payer"), tokens_in + tokens_out, "the key pays for it");
}

// ---------------------------------------------------------------------------------------------
// 5. A vision route cannot fan one request out without bound, nor past the key's quota.

const SIGHT: Answer = Answer { model: "vision-model", text: "a small cat", prompt_tokens: 9, completion_tokens: 3 };
const PROSE: Answer = Answer { model: "text-model", text: "It is a cat.", prompt_tokens: 11, completion_tokens: 4 };
const CROWD: &str = "sk-hostile-crowd-key-0003";
const FAN: &str = "sk-hostile-fan-key-0004";

fn vision_config(vision: &FaultyUpstream, text: &FaultyUpstream) -> String {
    config(
        &[("crowd", CROWD, 50), ("fan", FAN, 50)],
        &format!(
            "sources:\n  - {{name: v, base_url: '{}', models: [{{name: vis}}]}}\n  - {{name: t, base_url: '{}', models: [{{name: text}}]}}\n\
             routes:\n  - {{alias: eyes, providers: [{{source: v, model: vis}}]}}\n  - {{alias: seeing, mode: adapter, adapter_config: {{vision_alias: eyes, fallback: skip-image}}, providers: [{{source: t, model: text}}]}}\n",
            vision.url, text.url
        ),
    )
}

fn with_images(n: usize) -> Value {
    let mut content = vec![json!({"type": "text", "text": "What do these show?"})];
    content.extend(
        (0..n).map(|i| json!({"type": "image_url", "image_url": {"url": format!("https://img.example/{i}.png")}})),
    );
    json!({"model": "seeing", "messages": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn a_vision_route_refuses_more_images_than_max_images() {
    let vision = FaultyUpstream::healthy(SIGHT).await;
    let text = FaultyUpstream::healthy(PROSE).await;
    let gw = TestGateway::start(&vision_config(&vision, &text)).await;

    let (status, body) = status_json(gw.chat(with_images(9)).await).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "too_many_images", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("at most 8"), "names the limit: {body}");
    assert_eq!((vision.attempts(), text.attempts()), (0, 0), "nothing was called for it");

    assert_eq!(gw.chat(with_images(8)).await.status(), 200, "the limit itself is served");
    assert_eq!((vision.attempts(), text.attempts()), (8, 1));
}

#[tokio::test]
async fn fan_out_calls_count_against_the_key_so_it_overruns_by_one_request_at_most() {
    let gate = Arc::new(Semaphore::new(0));
    let vision = FaultyUpstream::start({
        let gate = gate.clone();
        move |arrival| Behaviour::Gated { gate: gate.clone(), then: Box::new(SIGHT.to(arrival)) }
    })
    .await;
    let text = FaultyUpstream::healthy(PROSE).await;
    let gw = TestGateway::start(&vision_config(&vision, &text)).await;
    let one_request = SIGHT.prompt_tokens + SIGHT.completion_tokens + PROSE.prompt_tokens + PROSE.completion_tokens;

    // Eight at once on a fresh 50-token key; the vision upstream holds its answers meanwhile.
    let mut pending: FuturesUnordered<_> = (0..8)
        .map(|_| {
            let url = gw.url.clone();
            tokio::spawn(async move {
                let request = reqwest::Client::new().post(format!("{url}/v1/chat/completions")).bearer_auth(CROWD);
                status_json(request.json(&with_images(1)).send().await.unwrap()).await
            })
        })
        .collect();
    within(GUARD, "the first description call", vision.until_attempts(1)).await;
    for refused in 1..=7 {
        let (status, body) =
            within(GUARD, &format!("refusal {refused} of 7 while one request holds the key's reserve"), pending.next())
                .await
                .unwrap()
                .unwrap();
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "key_quota_exceeded", "{body}");
    }
    assert_eq!(vision.attempts(), 1, "the refused requests made no vision calls");
    gate.add_permits(1000);
    let (status, body) = within(GUARD, "the one admitted request", pending.next()).await.unwrap().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(text.attempts(), 1);
    assert!(used(&gw, "crowd") <= 50 + one_request, "{} used", used(&gw, "crowd"));

    // One request with eight images on another fresh 50-token key: its description calls count too.
    let status = chat_as(&gw, FAN, &with_images(8)).await.status();
    assert!([200, 429].contains(&status.as_u16()), "{status}");
    let fan = used(&gw, "fan");
    assert!(fan <= 50 + one_request, "a 50-token key used {fan} tokens in one request");
}

// ---------------------------------------------------------------------------------------------
// 6. An SSE line or event without end fails the attempt, early, with invalid_upstream_response.

#[tokio::test]
async fn an_endless_sse_line_or_event_fails_the_attempt_as_an_invalid_upstream_response() {
    let upstream = FaultyUpstream::start(|arrival| {
        let first = chunk_event(ANSWER.model, r#"{"role":"assistant","content":""}"#, None);
        match arrival.number {
            // One `data:` line of 17 MiB that never ends.
            0 => {
                Behaviour::Sse { events: vec![first, format!("data: {}", "a".repeat(17 << 20))], end: StreamEnd::Stall }
            }
            // 64 KiB `data:` lines, 17 MiB of them, and never the blank line that ends the event.
            1 => {
                let line = format!("data: {}\n", "b".repeat(64 << 10));
                let mut events = vec![first];
                events.extend(std::iter::repeat_n(line, 17 * 16));
                Behaviour::Sse { events, end: StreamEnd::Stall }
            }
            _ => ANSWER.to(arrival),
        }
    })
    .await;
    // Silence is tolerated for 30 s: only the cap can end these streams in time.
    let gw = TestGateway::start(&config_with(&format!(
        "{NEVER_COOL}sources:\n  - {{name: flood, base_url: '{}', idle_timeout_seconds: 30, models: [{{name: sse}}]}}\n",
        upstream.url
    )))
    .await;

    for case in ["an endless line", "an endless event"] {
        let started = Instant::now();
        let response = gw.chat(chat_body("sse", true)).await;
        assert_eq!(response.status(), 200, "{case}: the first chunk came");
        let text = within(GUARD, case, response.text()).await.unwrap();
        let (events, done) = openai_events(&text);
        assert!(!done, "{case}: no [DONE] after a failure");
        let last = events.last().unwrap();
        assert_eq!(last["error"]["code"], "invalid_upstream_response", "{case}: {last}");
        assert!(started.elapsed() < Duration::from_secs(5), "{case}: ended after {:?}", started.elapsed());
    }
    let response = gw.chat(chat_body("sse", true)).await;
    assert!(response.text().await.unwrap().ends_with(DONE), "the gateway serves the next request");
}

// ---------------------------------------------------------------------------------------------
// 7. Connection and request limits, header and body timeouts.

#[tokio::test]
async fn connections_past_max_connections_are_refused_with_503() {
    let gw = TestGateway::start(&config_with("server: {max_connections: 2}\n")).await;
    let addr = gateway_addr(&gw);
    // Accepted in order: these two take both places.
    let held = [TcpStream::connect(&addr).await.unwrap(), TcpStream::connect(&addr).await.unwrap()];
    let mut third = TcpStream::connect(&addr).await.unwrap();
    let raw = within(GUARD, "the refusal and close", read_until_closed(&mut third)).await;
    let (status, head, body) = split_response(&raw);
    assert!(status.starts_with("HTTP/1.1 503"), "{raw}");
    assert!(head.contains("\r\nretry-after: 1"), "{raw}");
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {raw:?}"));
    assert_eq!(body["error"]["code"], "too_many_connections", "{body}");

    // A place freed is a place to take again.
    drop(held);
    within(GUARD, "a connection served once one closed", async {
        loop {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            stream.write_all(b"GET /health HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\r\n").await.unwrap();
            let raw = read_until_closed(&mut stream).await;
            if raw.starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(raw.starts_with("HTTP/1.1 503"), "{raw}");
        }
    })
    .await;
}

#[tokio::test]
async fn requests_past_max_in_flight_get_503_in_their_protocol_until_a_stream_ends() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config_with(&format!(
        "server: {{max_in_flight: 1}}\nsources:\n  - {{name: mock, base_url: '{}', models: [{{name: gated}}, {{name: fixture}}]}}\n",
        mock.url
    )))
    .await;
    // The stream holds the one place until it ends.
    let mut stream = gw.chat(chat_body("gated", true)).await;
    assert_eq!(stream.status(), 200);
    within(GUARD, "the first chunk", stream.chunk()).await.unwrap().unwrap();

    let refused = gw.chat(chat_body("fixture", false)).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_requests_in_flight", "{body}");
    assert!(body["error"]["message"].is_string() && body["error"]["type"].is_string(), "OpenAI error JSON: {body}");

    let anthropic = gw
        .post("/v1/messages")
        .json(&json!({"model": "fixture", "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(anthropic.status(), 503);
    assert_eq!(anthropic.headers()["retry-after"], "1");
    let body: Value = anthropic.json().await.unwrap();
    assert_eq!(
        (body["type"].as_str(), body["error"]["type"].as_str()),
        (Some("error"), Some("overloaded_error")),
        "{body}"
    );

    mock.state.gate.add_permits(100);
    assert!(within(GUARD, "the stream's end", stream.text()).await.unwrap().ends_with(DONE));
    within(GUARD, "a request served once the stream ended", async {
        loop {
            let response = gw.chat(chat_body("fixture", false)).await;
            if response.status() == 200 {
                break;
            }
            assert_eq!(response.status(), 503);
        }
    })
    .await;
}

#[tokio::test]
async fn a_request_head_that_never_ends_is_cut_off_after_header_timeout() {
    let gw = TestGateway::start(&config_with("server: {header_timeout_seconds: 0.5}\n")).await;
    let mut slow = TcpStream::connect(gateway_addr(&gw)).await.unwrap();
    slow.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    within(GUARD, "the gateway closing a half-sent head", read_until_closed(&mut slow)).await;
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(400), "closed after {waited:?}, before the 0.5 s were up");
    assert_eq!(gw.get("/health").send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_request_body_that_does_not_arrive_in_time_gets_408() {
    let gw = TestGateway::start(&config_with("server: {body_timeout_seconds: 0.5}\n")).await;
    let mut slow = TcpStream::connect(gateway_addr(&gw)).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: 100\r\nconnection: close\r\n\r\n{{\"model\":"
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let raw = within(GUARD, "the 408", read_until_closed(&mut slow)).await;
    let (status, _, body) = split_response(&raw);
    assert!(status.starts_with("HTTP/1.1 408"), "{raw}");
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {raw:?}"));
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    assert!(started.elapsed() >= Duration::from_millis(400), "answered after {:?}", started.elapsed());
}

// ---------------------------------------------------------------------------------------------
// 8. and 11 (a). What a script may fetch: every redirect hop is checked, and a bounded time.

/// A gateway whose sources `NAME` use the Lua scripts `NAME` (model `NAME-m`), in front of `mock`.
async fn script_gateway(mock: &MockUpstream, scripts: &[(&str, &str)], extra: &str) -> TestGateway {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("adapters")).unwrap();
    let mut sources = String::from("sources:\n");
    for (name, script) in scripts {
        std::fs::write(dir.path().join(format!("adapters/{name}.lua")), script).unwrap();
        sources.push_str(&format!(
            "  - {{name: {name}, adapter: {name}, base_url: '{}', api_key: sk-script-secret-0001, models: [{{name: {name}-m, upstream: 'say:hello there'}}]}}\n",
            mock.url
        ));
    }
    TestGateway::start_in(dir, &config_with(&format!("{extra}{sources}"))).await
}

#[tokio::test]
async fn a_script_fetch_redirected_to_a_host_not_allowed_is_refused() {
    let mock = MockUpstream::start().await;
    let denied = Canned::start(Duration::ZERO, 200, &[], r#"{"secret":"from the denied host"}"#).await;
    let target = format!("{}/stolen", denied.url);
    let allowed = Canned::start(Duration::ZERO, 302, &[("location", &target)], "").await;
    let script = r#"return { name = 'r', transform_request = function(raw)
        local got = json.decode(http_get('URL/start'))
        local req = json.decode(raw)
        req.messages = { { role = 'user', content = got.error or ('status ' .. got.status .. ': ' .. got.body) } }
        return json.encode(req)
      end }"#
        .replace("URL", &allowed.url);
    let allow = format!("adapters: {{fetcher: {{allow_hosts: ['127.0.0.1:{}']}}}}\n", allowed.port);
    let gw = script_gateway(&mock, &[("fetcher", &script)], &allow).await;

    let response = gw.chat(json!({"model": "fetcher-m", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let said = mock.state.requests().pop().unwrap().body["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(said.contains("redirect"), "the script was told of the redirect: {said}");
    assert!(said.contains(&format!("port {}", denied.port)), "naming where it led: {said}");
    assert_eq!(allowed.heads().len(), 1, "the allowed host was asked");
    assert_eq!(denied.connections(), 0, "the host that is not allowed got nothing");
}

#[tokio::test]
async fn a_script_that_keeps_fetching_is_stopped_by_the_wall_clock_bound() {
    let mock = MockUpstream::start().await;
    let slow = Canned::start(Duration::from_millis(200), 200, &[], r#"{"token":"t"}"#).await;
    let keeper = r#"return { name = 'k', transform_request = function(raw)
        while true do http_get('URL/token') end
      end }"#
        .replace("URL", &slow.url);
    let fine = "return { name = 'f', transform_request = function(raw) return raw end }";
    let extra = format!(
        "sandbox: {{wall_ms_per_call: 1000, cpu_ms_per_call: 500}}\nadapters: {{keeper: {{allow_hosts: ['127.0.0.1:{}']}}}}\n",
        slow.port
    );
    let gw = script_gateway(&mock, &[("keeper", &keeper), ("fine", fine)], &extra).await;

    let started = Instant::now();
    let response = within(
        GUARD,
        "the wall-clock bound",
        gw.chat(json!({"model": "keeper-m", "messages": [{"role": "user", "content": "x"}]})),
    )
    .await;
    let took = started.elapsed();
    let (status, body) = status_json(response).await;
    assert_eq!(status, 502, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("wall-clock bound"), "{message}");
    assert!(Duration::from_millis(900) <= took && took < Duration::from_secs(4), "stopped after {took:?}");
    assert!(slow.heads().len() >= 2, "the script fetched over and over: {}", slow.heads().len());
    let response = gw.chat(json!({"model": "fine-m", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(response.status(), 200, "the gateway serves the next request");
}

// ---------------------------------------------------------------------------------------------
// 9. An upstream's redirect to another origin is not followed: its credentials stay home.

#[tokio::test]
async fn an_upstream_redirect_to_another_origin_is_not_followed_and_the_key_stays_home() {
    const SECRET: &str = "sk-ant-api03-upstream-secret-0123456789";
    let elsewhere = Canned::start(Duration::ZERO, 200, &[], CLAUDE_MESSAGE).await;
    let target = format!("{}/v1/messages", elsewhere.url);
    let redirector = Canned::start(Duration::ZERO, 307, &[("location", &target)], "").await;
    let gw = TestGateway::start(&config_with(&format!(
        "sources:\n  - {{name: claude, adapter: anthropic, base_url: '{}/v1', api_key: {SECRET}, models: [{{name: c, upstream: claude-sonnet-4}}]}}\n",
        redirector.url
    )))
    .await;

    let response = gw.chat(chat_body("c", false)).await;
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_server_error(), "a cross-origin redirect fails the attempt: {status} {text}");
    assert_eq!(redirector.heads().len(), 1);
    assert!(redirector.heads()[0].contains(SECRET), "the key went to its own origin");
    assert_eq!(elsewhere.connections(), 0, "the redirect target got nothing (no x-api-key)");
    assert!(!text.contains(SECRET), "{text}");
}

// ---------------------------------------------------------------------------------------------
// 10. Secrets on disk are the owner's alone.

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[tokio::test]
async fn the_data_dir_and_every_file_holding_secrets_are_the_owners_alone() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state");
    let yaml = config(&[], &format!("sources:\n  - {{name: base, base_url: '{}', models: [{{name: m}}]}}\n", mock.url))
        .replace("data_dir: {data}", "data_dir: {data}/state");
    let gw = TestGateway::start_in(dir, &yaml).await;
    assert_eq!(gw.chat(chat_body("m", false)).await.status(), 200);
    let admin = |method: reqwest::Method, path: &str| {
        reqwest::Client::new().request(method, format!("{}/admin/api/{path}", gw.url)).bearer_auth(ADMIN)
    };
    let source = json!({"name": "extra", "base_url": mock.url, "api_key": "sk-on-disk-secret-0123456789", "models": [{"name": "m2"}]});
    assert_eq!(admin(reqwest::Method::POST, "sources").json(&source).send().await.unwrap().status(), 201);
    let script = "return { name = 'up', transform_request = function(raw) return raw end }";
    let uploaded = admin(reqwest::Method::PUT, "adapters/uploaded").body(script).send().await.unwrap();
    assert!(uploaded.status().is_success(), "{}", uploaded.text().await.unwrap());

    assert_eq!(mode(&data), 0o700, "data_dir");
    assert_eq!(mode(&data.join("adapters")), 0o700, "adapter_dir");
    for file in ["runtime.yaml", "state.db", "state.journal", "adapters/uploaded.lua"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    for file in ["state.db-wal", "state.db-shm"] {
        if data.join(file).exists() {
            assert_eq!(mode(&data.join(file)), 0o600, "{file}");
        }
    }
    assert!(std::fs::read_to_string(data.join("runtime.yaml")).unwrap().contains("extra"));
}

// ---------------------------------------------------------------------------------------------
// 11. Lower: log injection, a probe place left by a client, partial keys in errors, admin 413.

#[tokio::test]
async fn control_characters_from_a_client_cannot_forge_log_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Binary::start(dir.path(), "");
    let forged =
        gateway.chat(&json!({"model": "x\nFORGED line", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(forged.status(), 404);
    // Logged after the forged one: once its line is in, so is every line before it.
    let marker =
        gateway.chat(&json!({"model": "end-of-test-marker", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(marker.status(), 404);
    let mut lines = Vec::new();
    within(GUARD, "the marker's log line", async {
        while let Some(line) = gateway.log.recv().await {
            let last = line.contains("end-of-test-marker");
            lines.push(line);
            if last {
                break;
            }
        }
    })
    .await;
    let log = lines.join("\n");
    assert!(lines.iter().all(|l| !l.starts_with("FORGED")), "a forged line: {log}");
    assert!(log.contains(r"x\nFORGED line"), "the model is logged escaped: {log}");
    gateway.assert_alive("a forged model name").await;
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_probe_gives_the_probe_place_back() {
    let primary = FaultyUpstream::start(|arrival| match arrival.number {
        0 => Behaviour::json(500, error_body("The server had an error.", Some("server_error"), None, None)),
        _ => Behaviour::NeverAnswer,
    })
    .await;
    let clock = Arc::new(ManualClock::at(1_800_000_000_000));
    let yaml = config_with(&format!(
        "channel_selection: order\nsources:\n  - {{name: primary, base_url: '{}', models: [{{name: shared}}]}}\n",
        primary.url
    ));
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &yaml, clock.clone()).await;
    let probes = || gw.gateway.scheduler.health().first().map(|(_, h)| h.probes_in_flight);

    assert!(gw.chat(chat_body("shared", false)).await.status().is_server_error());
    assert_eq!(probes(), Some(0), "the slot cools after its 500");
    // Past the middle of its 5 s window: the next request probes it.
    clock.advance(Duration::from_secs(3));
    let url = gw.url.clone();
    let client = tokio::spawn(async move {
        let request = reqwest::Client::new().post(format!("{url}/v1/chat/completions")).bearer_auth(KEY);
        request.json(&chat_body("shared", false)).send().await
    });
    within(GUARD, "the probe reaching the primary", primary.until_attempts(2)).await;
    assert_eq!(probes(), Some(1), "the request holds the probe place");
    client.abort();
    assert!(client.await.unwrap_err().is_cancelled());
    within(GUARD, "the gateway leaving the primary", primary.until_ended(2)).await;
    assert_eq!(probes(), Some(0), "the client hung up mid-probe: the place is back");
}

#[tokio::test]
async fn an_upstream_error_echoing_the_key_whole_or_in_part_is_masked() {
    const SECRET: &str = "sk-proj-upstream-0123456789abcdefXYZ";
    let message = format!(
        "Incorrect API key provided: {SECRET}. Keys look like {}****{}; yours ends in {}.",
        &SECRET[..14],
        &SECRET[SECRET.len() - 4..],
        &SECRET[SECRET.len() - 15..]
    );
    let body = error_body(&message, Some("invalid_request_error"), None, Some("invalid_api_key"));
    let upstream = FaultyUpstream::start(move |_| Behaviour::json(401, body.clone())).await;
    let gw = TestGateway::start(&config_with(&format!(
        "sources:\n  - {{name: leaky, base_url: '{}', api_key: {SECRET}, models: [{{name: m}}]}}\n",
        upstream.url
    )))
    .await;
    let response = gw.chat(chat_body("m", false)).await;
    assert_ne!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("Incorrect API key provided"), "the upstream's message is passed on: {text}");
    let leaked: Vec<&str> =
        (0..=SECRET.len() - 12).map(|at| &SECRET[at..at + 12]).filter(|run| text.contains(run)).collect();
    assert!(leaked.is_empty(), "runs of the key in the client's error: {leaked:?} in {text}");
}

#[tokio::test]
async fn an_admin_body_over_the_limit_is_answered_with_error_json() {
    let gw = TestGateway::start(&config(&[], "")).await;
    let huge = json!({"name": "big", "models": ["m"], "padding": "x".repeat(3 << 20)});
    let response = reqwest::Client::new()
        .post(format!("{}/admin/api/keys", gw.url))
        .bearer_auth(ADMIN)
        .json(&huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let (_, body) = status_json(response).await;
    assert_eq!(body["error"]["code"], "request_too_large", "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
}

// ---------------------------------------------------------------------------------------------
// Review follow-ups: idle connections, translation failures, stalled error bodies.

#[tokio::test]
async fn silent_and_idle_connections_are_closed() {
    let gw =
        TestGateway::start(&config_with("server: {header_timeout_seconds: 0.5, idle_timeout_seconds: 0.5}\n")).await;
    let addr = gateway_addr(&gw);
    // Nothing at all, and an HTTP/2 preface with no stream after it: both hold no place for long.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let mut preface = TcpStream::connect(&addr).await.unwrap();
    preface.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    let started = Instant::now();
    within(GUARD, "a silent connection closed", read_until_closed(&mut silent)).await;
    within(GUARD, "a preface-only connection closed", read_until_closed(&mut preface)).await;
    assert!(started.elapsed() >= Duration::from_millis(400), "closed after {:?}", started.elapsed());

    // A keep-alive connection is served, then closed once idle.
    let mut kept = TcpStream::connect(&addr).await.unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nhost: gw\r\n\r\n").await.unwrap();
    let raw = within(GUARD, "served, then closed when idle", read_until_closed(&mut kept)).await;
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
}

#[tokio::test]
async fn a_request_one_adapter_cannot_translate_goes_to_another_adapter_and_cools_nothing() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("adapters")).unwrap();
    let picky = "return { name = 'picky', transform_request = function(raw) error('cannot translate this') end }";
    std::fs::write(dir.path().join("adapters/picky.lua"), picky).unwrap();
    let sources = format!(
        "admin_token: {ADMIN}\nchannel_selection: order\nsources:\n  - {{name: first, adapter: picky, base_url: '{url}', models: [{{name: m, upstream: fixture}}]}}\n  - {{name: second, adapter: picky, base_url: '{url}', models: [{{name: m, upstream: fixture}}]}}\n  - {{name: third, base_url: '{url}', models: [{{name: m, upstream: 'say:served by openai'}}]}}\n",
        url = mock.url
    );
    let gw = TestGateway::start_in(dir, &config_with(&sources)).await;
    let (status, body) = status_json(gw.chat(chat_body("m", false)).await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "served by openai");
    let rows = log_rows(&gw, "").await;
    let tried: Vec<&str> = rows.iter().filter_map(|r| r["source"].as_str()).collect();
    assert!(tried.contains(&"first") && !tried.contains(&"second"), "the same adapter is not tried twice: {tried:?}");
    assert!(gw.gateway.scheduler.health().is_empty(), "nothing cools: {:?}", gw.gateway.scheduler.health());
}

#[tokio::test]
async fn an_error_head_whose_body_stalls_is_bounded_by_the_first_byte_timeout() {
    // An upstream that answers 500, promises a body and never sends it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 65536];
            let _ = stream.read(&mut buf).await;
            let _ = stream
                .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"error\":")
                .await;
            held.push(stream);
        }
    });
    let gw = TestGateway::start(&config_with(&format!(
        "{NEVER_COOL}sources:\n  - {{name: stalls, base_url: '{url}', first_byte_timeout_seconds: 0.5, models: [{{name: m}}]}}\n"
    )))
    .await;
    let started = Instant::now();
    let response = within(GUARD, "the attempt bounded", gw.chat(chat_body("m", true))).await;
    assert_eq!(response.status(), 504, "{:?}", response.text().await);
    assert!(started.elapsed() >= Duration::from_millis(400));
}

// The gateway's own descriptors run out (a burst past `ulimit -n`): its limit, not the source's.

/// Sets the process's soft open-file limit; returns the one it had.
fn set_open_file_limit(pid: u32, soft: u64) -> u64 {
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    assert_eq!(unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) }, 0);
    let new = libc::rlimit { rlim_cur: soft, rlim_max: old.rlim_max };
    assert_eq!(unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) }, 0);
    old.rlim_cur
}

#[tokio::test]
async fn running_out_of_descriptors_is_the_gateways_own_limit_and_cools_no_source() {
    // Every answer closes its connection, so each request opens a new one to the upstream.
    let upstream = FaultyUpstream::healthy(ANSWER).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gateway = Binary::start(
        dir.path(),
        &format!(
            "cooldown: {{failure_threshold: 1}}\nsources:\n  - {{name: one, base_url: '{}', models: [{{name: m}}]}}\n",
            upstream.url
        ),
    );
    // One client connection, kept alive: it is open before the limit falls.
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
    let url = format!("{}/v1/chat/completions", gateway.url);
    let ask = || async {
        let response =
            within(GUARD, "an answer", client.post(&url).bearer_auth(KEY).json(&chat_body("m", false)).send())
                .await
                .expect("the gateway answers");
        let status = response.status();
        (status, response.json::<Value>().await.expect("JSON"))
    };
    let (status, body) = ask().await;
    assert_eq!(status, 200, "{body}");

    // No new descriptor can be opened: the upstream cannot be dialled.
    let before = set_open_file_limit(gateway.pid(), 0);
    let (status, body) = ask().await;
    set_open_file_limit(gateway.pid(), before);
    assert_eq!(status, 503, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the gateway's own limit") && message.contains("ulimit -n"),
        "says whose limit and the fix: {message}"
    );
    assert_eq!(upstream.attempts(), 1, "the upstream was never reached");

    // With the limit back the source serves at once: one failure would have cooled it.
    let (status, body) = ask().await;
    assert_eq!(status, 200, "the source was not cooled: {body}");
    assert_eq!(upstream.attempts(), 2);
    gateway.assert_alive("running out of descriptors").await;
}
