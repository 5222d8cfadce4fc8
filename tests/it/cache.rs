//! The response cache end to end: a repeated request answered without the upstream as JSON
//! and as each protocol's stream, never across keys (unless their group shares), the client's
//! `no-cache`/`no-store`/TTL honoured, truncated, failed and cancelled answers never kept,
//! entries expiring on the gateway's clock, and the admin API's view and purge.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use switchyard::scheduler::ManualClock;
use switchyard::state::LogQuery;

use crate::support::gateway::shared_cache;
use crate::support::{KEY, MockUpstream, TestGateway, anthropic_events, assemble, openai_events};

const OTHER_KEY: &str = "sk-test-gateway-key-0002";
const TEAM_A: &str = "sk-test-gateway-key-team-a";
const TEAM_B: &str = "sk-test-gateway-key-team-b";

/// Four keys (two alone, two in the shared group `team`) and one mock source whose answers are
/// cached; `extra` goes under `cache:`.
fn config(mock: &MockUpstream, extra: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\n\
         cache: {{ttl_seconds: 60, shared_groups: [team]{extra}}}\n\
         prices: [{{source: mock, model: '*', input: '3', output: '15'}}]\n\
         keys:\n\
         \x20 - {{name: tester, key: {KEY}, models: ['*']}}\n\
         \x20 - {{name: other, key: {OTHER_KEY}, models: ['*']}}\n\
         \x20 - {{name: team-a, key: {TEAM_A}, models: ['*'], group: team}}\n\
         \x20 - {{name: team-b, key: {TEAM_B}, models: ['*'], group: team}}\n\
         \x20 - {{name: uncached, key: sk-test-gateway-key-nocache, models: ['*'], cache: false}}\n\
         sources:\n\
         \x20 - {{name: mock, base_url: '{url}', api_key: sk-upstream-secret-0123456789, stream_whole_answers: false,\n\
         \x20     idle_timeout_seconds: 0.5, cache: true, models: [{{name: fixture}}, {{name: tools}}, {{name: cut}}, {{name: gated}}, {{name: error-500}}]}}\n",
        cache = shared_cache().display(),
        url = mock.url,
    )
}

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "stream_options": {"include_usage": true},
           "messages": [{"role": "user", "content": "Hello!"}]})
}

async fn chat_as(gw: &TestGateway, key: &str, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request =
        reqwest::Client::new().post(format!("{}/v1/chat/completions", gw.url)).bearer_auth(key).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

fn cache_header(response: &reqwest::Response) -> Option<String> {
    response.headers().get("x-switchyard-cache").map(|v| v.to_str().unwrap().to_string())
}

fn upstream_calls(mock: &MockUpstream) -> usize {
    mock.state.requests().len()
}

#[tokio::test]
async fn a_repeated_request_is_answered_from_the_cache_as_json_and_as_a_stream() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock, "")).await;

    let first = chat_as(&gw, KEY, &ask("fixture", false), &[]).await;
    assert_eq!((first.status().as_u16(), cache_header(&first).as_deref()), (200, Some("miss")));
    let first: Value = first.json().await.unwrap();
    assert_eq!(upstream_calls(&mock), 1);

    // Members in another order, a stream flag, a user label: the same request.
    let again = json!({"messages": [{"content": "Hello!", "role": "user"}], "user": "someone", "model": "fixture"});
    let hit = chat_as(&gw, KEY, &again, &[]).await;
    assert_eq!((hit.status().as_u16(), cache_header(&hit).as_deref()), (200, Some("hit")));
    assert_eq!(hit.headers()["x-switchyard-source"], "mock");
    assert!(hit.headers().contains_key("age"));
    let hit: Value = hit.json().await.unwrap();
    assert_eq!(hit["choices"], first["choices"]);
    assert_eq!(hit["usage"], first["usage"]);
    assert_eq!(hit["id"], first["id"]);

    // The same answer to a streaming client: chunks that add up to it, usage, [DONE].
    let streamed = chat_as(&gw, KEY, &ask("fixture", true), &[]).await;
    assert_eq!(cache_header(&streamed).as_deref(), Some("hit"));
    assert_eq!(streamed.headers()["content-type"], "text/event-stream");
    let (events, done) = openai_events(&streamed.text().await.unwrap());
    assert!(done, "a replayed stream ends with [DONE]");
    let whole = assemble(&events);
    assert_eq!(whole.content, first["choices"][0]["message"]["content"].as_str().unwrap());
    assert_eq!(whole.finish.as_deref(), first["choices"][0]["finish_reason"].as_str());
    assert_eq!(whole.usage.as_ref(), Some(&first["usage"]));
    assert_eq!(upstream_calls(&mock), 1, "no hit went upstream");

    // Two rows of source `cache`, with the tokens the client got and no cost; the metrics count them.
    let rows = gw.gateway.state.query_logs(&LogQuery { cache_hit: Some(true), ..LogQuery::default() }).unwrap().rows;
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.source == "cache" && r.status == Some(200) && r.cost_usd.is_none()));
    assert_eq!(rows[0].tokens_out, first["usage"]["completion_tokens"].as_u64());
    let metrics = gw.scrape_metrics().await.text().await.unwrap();
    assert!(metrics.contains("switchyard_cache_requests_total{result=\"hit\"} 2"), "{metrics}");
    assert!(metrics.contains("switchyard_cache_requests_total{result=\"miss\"} 1"), "{metrics}");
    let saved = format!(
        "switchyard_cache_saved_tokens_total{{gen_ai_token_type=\"output\"}} {}",
        2 * first["usage"]["completion_tokens"].as_u64().unwrap()
    );
    assert!(metrics.contains(&saved), "{metrics}");
    // What the first answer cost (9 in at $3, 12 out at $15 per 1M), saved by each hit.
    assert_eq!(rows[0].message.as_deref(), Some("saved $0.000207"));
    let usd: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("switchyard_cache_saved_usd_total "))
        .expect("the saved-USD counter")
        .parse()
        .unwrap();
    assert!((usd - 0.000414).abs() < 1e-12, "{usd}");
}

#[tokio::test]
async fn a_streamed_answer_is_kept_once_complete_with_its_tool_calls() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock, "")).await;
    let live = chat_as(&gw, KEY, &ask("tools", true), &[]).await;
    assert_eq!(cache_header(&live).as_deref(), Some("miss"));
    let (live_events, _) = openai_events(&live.text().await.unwrap());
    let live = assemble(&live_events);
    assert!(!live.tool_calls.is_empty(), "the fixture calls tools");

    let whole = chat_as(&gw, KEY, &ask("tools", false), &[]).await;
    assert_eq!(cache_header(&whole).as_deref(), Some("hit"));
    let whole: Value = whole.json().await.unwrap();
    let calls = whole["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), live.tool_calls.len());
    assert_eq!(calls[0]["function"]["name"], live.tool_calls[0].1.as_str());
    assert_eq!(calls[0]["function"]["arguments"], live.tool_calls[0].2.as_str());

    let replayed = chat_as(&gw, KEY, &ask("tools", true), &[]).await;
    assert_eq!(cache_header(&replayed).as_deref(), Some("hit"));
    let (events, done) = openai_events(&replayed.text().await.unwrap());
    let replayed = assemble(&events);
    assert!(done);
    assert_eq!(replayed.tool_calls, live.tool_calls);
    assert_eq!((replayed.finish, replayed.usage), (live.finish, live.usage));
    assert_eq!(upstream_calls(&mock), 1);
}

#[tokio::test]
async fn anthropic_and_responses_clients_get_hits_in_their_own_protocol() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock, "")).await;
    let messages = |stream: bool| json!({"model": "fixture", "max_tokens": 100, "stream": stream, "messages": [{"role": "user", "content": "Hello!"}]});
    let post = |path: &str, body: Value| {
        reqwest::Client::new()
            .post(format!("{}{path}", gw.url))
            .header("x-api-key", KEY)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
    };
    let live = post("/v1/messages", messages(false)).await.unwrap();
    assert_eq!(cache_header(&live).as_deref(), Some("miss"));
    let live: Value = live.json().await.unwrap();
    let hit = post("/v1/messages", messages(true)).await.unwrap();
    assert_eq!(cache_header(&hit).as_deref(), Some("hit"));
    let events = anthropic_events(&hit.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    let text: String = events.iter().filter_map(|(_, data)| data["delta"]["text"].as_str()).collect();
    assert_eq!(text, live["content"][0]["text"].as_str().unwrap());
    assert_eq!(upstream_calls(&mock), 1);

    // Responses: its own entry (another protocol), then a hit as a stream of its events.
    let responses = |stream: bool| json!({"model": "fixture", "input": "Hello!", "stream": stream});
    let live = gw.post("/v1/responses").json(&responses(false)).send().await.unwrap();
    assert_eq!(cache_header(&live).as_deref(), Some("miss"));
    let live: Value = live.json().await.unwrap();
    assert_eq!(upstream_calls(&mock), 2);
    let hit = gw.post("/v1/responses").json(&responses(true)).send().await.unwrap();
    assert_eq!(cache_header(&hit).as_deref(), Some("hit"));
    let body = hit.text().await.unwrap();
    let events: Vec<Value> = body
        .split_terminator("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let sequence: Vec<u64> = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
    assert!(sequence.windows(2).all(|w| w[1] == w[0] + 1), "{sequence:?}");
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "response.completed");
    assert_eq!(
        completed["response"]["output_text"].as_str().or(live["output_text"].as_str()),
        live["output_text"].as_str()
    );
    assert_eq!(upstream_calls(&mock), 2);
}

#[tokio::test]
async fn keys_never_share_entries_unless_their_group_is_shared() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock, "")).await;
    let body = ask("fixture", false);
    assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("miss"));
    assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("hit"));
    assert_eq!(cache_header(&chat_as(&gw, OTHER_KEY, &body, &[]).await).as_deref(), Some("miss"), "another key");
    assert_eq!(cache_header(&chat_as(&gw, TEAM_A, &body, &[]).await).as_deref(), Some("miss"));
    assert_eq!(cache_header(&chat_as(&gw, TEAM_B, &body, &[]).await).as_deref(), Some("hit"), "the group shares");
    // A key that says no is not cached, whatever its source says.
    let uncached = chat_as(&gw, "sk-test-gateway-key-nocache", &body, &[]).await;
    assert_eq!((uncached.status().as_u16(), cache_header(&uncached)), (200, None));
    assert_eq!(upstream_calls(&mock), 4);
}

#[tokio::test]
async fn the_clients_no_cache_no_store_and_ttl_are_honoured() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock, "")).await;
    let body = ask("fixture", false);
    // no-store: neither read nor kept.
    let r = chat_as(&gw, KEY, &body, &[("cache-control", "no-store")]).await;
    assert_eq!(cache_header(&r).as_deref(), Some("bypass"));
    // A TTL of 0: asked upstream, not kept.
    let r = chat_as(&gw, KEY, &body, &[("x-switchyard-cache-ttl", "0")]).await;
    assert_eq!(cache_header(&r).as_deref(), Some("miss"));
    assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("miss"));
    assert_eq!(upstream_calls(&mock), 3);
    // no-cache: not read (upstream again), but the fresh answer is kept.
    let r = chat_as(&gw, KEY, &body, &[("cache-control", "no-cache")]).await;
    assert_eq!(cache_header(&r).as_deref(), Some("miss"));
    assert_eq!(upstream_calls(&mock), 4);
    assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("hit"));
    assert_eq!(upstream_calls(&mock), 4);
    // A TTL that is not a number is the client's error, in its protocol.
    let r = chat_as(&gw, KEY, &body, &[("x-switchyard-cache-ttl", "soon")]).await;
    assert_eq!(r.status(), 400);
    let error: Value = r.json().await.unwrap();
    assert_eq!(error["error"]["param"], "x-switchyard-cache-ttl");
}

#[tokio::test]
async fn truncated_failed_and_cancelled_answers_are_never_kept() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock, "")).await;
    let token = gw.admin_token();
    let entries = || async { gw.admin_json(&token, "/admin/api/cache").await["entries"].as_u64().unwrap() };
    // A stream cut before its end: an error event for the client (no [DONE]), nothing kept.
    let cut = chat_as(&gw, KEY, &ask("cut", true), &[]).await;
    assert_eq!(cache_header(&cut).as_deref(), Some("miss"));
    let (events, done) = openai_events(&cut.text().await.unwrap());
    assert!(!done && events.last().unwrap()["error"].is_object());
    // An upstream error: no answer, nothing kept.
    assert!(chat_as(&gw, KEY, &ask("error-500", false), &[]).await.status().is_server_error());
    assert_eq!(entries().await, 0);
    // A client that hangs up mid-stream: nothing kept.
    let cancelled = chat_as(&gw, KEY, &ask("gated", true), &[]).await;
    let mut bytes = cancelled.bytes_stream();
    bytes.next().await.unwrap().unwrap();
    drop(bytes);
    tokio::time::timeout(Duration::from_secs(10), mock.state.hung_up.notified()).await.unwrap();
    assert!(mock.state.hung_up_flag.load(Ordering::SeqCst));
    assert_eq!(entries().await, 0);
    mock.state.gate.add_permits(100);
    let before = upstream_calls(&mock);
    let again = chat_as(&gw, KEY, &ask("gated", true), &[]).await;
    assert_eq!(cache_header(&again).as_deref(), Some("miss"), "the cancelled stream was not kept");
    let (_, done) = openai_events(&again.text().await.unwrap());
    assert!(done);
    // ...while the stream that completed was.
    assert_eq!(entries().await, 1);
    assert_eq!(cache_header(&chat_as(&gw, KEY, &ask("gated", true), &[]).await).as_deref(), Some("hit"));
    assert_eq!(upstream_calls(&mock), before + 1);
}

#[tokio::test]
async fn entries_expire_on_the_gateways_clock_and_the_admin_api_purges_them() {
    let mock = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::at(1_765_000_000_000));
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &config(&mock, ""), clock.clone()).await;
    let body = ask("fixture", false);
    assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("miss"));
    clock.advance(Duration::from_secs(59));
    assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("hit"));
    // The client takes nothing older than 30 s.
    let r = chat_as(&gw, KEY, &body, &[("cache-control", "max-age=30")]).await;
    assert_eq!(cache_header(&r).as_deref(), Some("miss"));
    clock.advance(Duration::from_secs(61));
    assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("miss"), "expired");
    assert_eq!(upstream_calls(&mock), 3);

    let token = gw.admin_token();
    let shown = gw.admin_json(&token, "/admin/api/cache").await;
    assert_eq!(shown["entries"], 1);
    assert_eq!(shown["config"]["ttl_seconds"], 60);
    assert!(shown["bytes"].as_u64().unwrap() > 100);
    let purged: Value = reqwest::Client::new()
        .delete(format!("{}/admin/api/cache", gw.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((purged["purged"].as_u64(), purged["cache"]["entries"].as_u64()), (Some(1), Some(0)));
    assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("miss"));
}

#[tokio::test]
async fn a_bad_cache_block_is_refused_at_start_with_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, "listen: 127.0.0.1:0\ncache: {ttl_seconds: 0, max_mb: 1, max_entry_kb: 4096}\n").unwrap();
    let Err(error) = switchyard::startup::load_config(&file) else { panic!("refused") };
    let error = error.to_string();
    assert!(error.contains("cache.ttl_seconds"), "{error}");
    std::fs::write(&file, "listen: 127.0.0.1:0\ncache: {max_mb: 1, max_entry_kb: 4096}\n").unwrap();
    let Err(error) = switchyard::startup::load_config(&file) else { panic!("refused") };
    let error = error.to_string();
    assert!(error.contains("cache.max_entry_kb"), "{error}");
}

/// An OpenAI embeddings upstream whose vectors are bags of words: each word (lowercased letters
/// and digits) adds one to a dimension its hash picks, so texts sharing most words lie close.
/// Counts what it is asked.
async fn bag_of_words_embedder() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use axum::routing::post;
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    let app = axum::Router::new().route(
        "/v1/embeddings",
        post(move |axum::Json(body): axum::Json<Value>| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let text = body["input"].as_str().unwrap_or_default().to_lowercase();
                let mut vector = vec![0.0f32; 64];
                let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
                for word in &words {
                    let hash = word
                        .bytes()
                        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
                    vector[(hash % 64) as usize] += 1.0;
                }
                axum::Json(json!({"object": "list", "model": "bow",
                    "data": [{"object": "embedding", "index": 0, "embedding": vector}],
                    "usage": {"prompt_tokens": words.len(), "total_tokens": words.len()}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, asked)
}

#[tokio::test]
async fn the_semantic_cache_answers_a_paraphrase_above_its_threshold_and_not_below() {
    let mock = MockUpstream::start().await;
    let (embedder, embedded) = bag_of_words_embedder().await;
    let yaml = format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\n\
         cache: {{ttl_seconds: 60, semantic: {{model: bow, threshold: 0.8}}}}\n\
         keys:\n\
         \x20 - {{name: tester, key: {KEY}, models: ['*']}}\n\
         \x20 - {{name: other, key: {OTHER_KEY}, models: ['*']}}\n\
         sources:\n\
         \x20 - {{name: mock, base_url: '{url}', api_key: sk-upstream-secret-0123456789, stream_whole_answers: false, models: [{{name: fixture}}]}}\n\
         \x20 - {{name: embedder, base_url: '{embedder}', models: [{{name: bow, kind: embedding}}]}}\n\
         routes:\n\
         \x20 - {{alias: faq, cache: true, semantic_cache: true, providers: [{{source: mock, model: fixture}}]}}\n\
         \x20 - {{alias: plain, cache: true, providers: [{{source: mock, model: fixture}}]}}\n",
        cache = shared_cache().display(),
        url = mock.url,
    );
    let gw = TestGateway::start(&yaml).await;
    let ask = |model: &str, text: &str, temperature: f64| {
        json!({"model": model, "temperature": temperature, "messages": [
            {"role": "system", "content": "Answer briefly."}, {"role": "user", "content": text}]})
    };
    let first = chat_as(&gw, KEY, &ask("faq", "What is the capital city of France?", 0.0), &[]).await;
    assert_eq!(cache_header(&first).as_deref(), Some("miss"));
    let first: Value = first.json().await.unwrap();
    assert_eq!(upstream_calls(&mock), 1);

    // The same words but two (cosine 0.88 in this embedder's bags): answered from the cache.
    let paraphrase = chat_as(&gw, KEY, &ask("faq", "Tell me: what is the capital city of France?", 0.0), &[]).await;
    assert_eq!(cache_header(&paraphrase).as_deref(), Some("hit"));
    let similarity: f32 = paraphrase.headers()["x-switchyard-cache-similarity"].to_str().unwrap().parse().unwrap();
    assert!((0.8..1.0).contains(&similarity), "{similarity}");
    let paraphrase: Value = paraphrase.json().await.unwrap();
    assert_eq!(paraphrase["choices"], first["choices"]);
    // A streaming client gets it as a stream.
    let mut streaming = ask("faq", "what is the capital city of France? Tell me", 0.0);
    streaming["stream"] = json!(true);
    let streamed = chat_as(&gw, KEY, &streaming, &[]).await;
    assert_eq!(cache_header(&streamed).as_deref(), Some("hit"));
    let (events, done) = openai_events(&streamed.text().await.unwrap());
    assert!(done);
    assert_eq!(assemble(&events).content, first["choices"][0]["message"]["content"].as_str().unwrap());
    assert_eq!(upstream_calls(&mock), 1);

    // Below the threshold: another question, and a paraphrase too far from it.
    for text in ["How tall is Mount Everest?", "France: which city is its capital, and since when?"] {
        let far = chat_as(&gw, KEY, &ask("faq", text, 0.0), &[]).await;
        assert_eq!(cache_header(&far).as_deref(), Some("miss"), "{text}");
    }
    assert_eq!(upstream_calls(&mock), 3);
    // Everything but the last user message must match: another temperature, another key, a
    // route without the semantic cache.
    let warmer = chat_as(&gw, KEY, &ask("faq", "Tell me: what is the capital city of France?", 0.7), &[]).await;
    assert_eq!(cache_header(&warmer).as_deref(), Some("miss"));
    let other = chat_as(&gw, OTHER_KEY, &ask("faq", "Tell me: what is the capital city of France?", 0.0), &[]).await;
    assert_eq!(cache_header(&other).as_deref(), Some("miss"));
    let plain = chat_as(&gw, KEY, &ask("plain", "Tell me: what is the capital city of France?", 0.0), &[]).await;
    assert_eq!(cache_header(&plain).as_deref(), Some("miss"));
    assert_eq!(upstream_calls(&mock), 6);
    // The embedder was asked once per semantic lookup (never for the plain route), on the key's books.
    assert_eq!(embedded.load(Ordering::SeqCst), 7);
    let rows = gw.gateway.state.query_logs(&LogQuery { cache_hit: Some(true), ..LogQuery::default() }).unwrap().rows;
    assert_eq!(rows.len(), 2);
    assert!(rows[0].message.as_deref().unwrap_or_default().starts_with("semantic cache"), "{:?}", rows[0].message);
    let shown = gw.admin_json(&gw.admin_token(), "/admin/api/cache").await;
    assert_eq!(shown["semantic_prompts"], 5, "{shown}");
}

#[tokio::test]
async fn the_size_bound_holds_under_a_burst_of_distinct_large_answers() {
    use crate::support::faulty::{Behaviour, FaultyUpstream, completion_body};
    // Every answer is ~200 KB of its own text: a 1 MiB cache holds a handful at most.
    let upstream = FaultyUpstream::start(|arrival| {
        let text = format!("{} {}", arrival.number, "x".repeat(200_000));
        let usage = r#"{"prompt_tokens":5,"completion_tokens":50000,"total_tokens":50005}"#;
        Behaviour::json(200, completion_body("big", Some(&text), "stop", usage))
    })
    .await;
    let yaml = format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\n\
         cache: {{max_mb: 1, max_entry_kb: 300}}\n\
         keys: [{{name: tester, key: {KEY}, models: ['*']}}]\n\
         sources:\n\
         \x20 - {{name: big, base_url: '{url}', stream_whole_answers: false, cache: true, max_concurrent: 64, models: [{{name: big}}]}}\n",
        cache = shared_cache().display(),
        url = upstream.url,
    );
    let gw = TestGateway::start(&yaml).await;
    let asks = (0..40).map(|n| {
        let body = json!({"model": "big", "messages": [{"role": "user", "content": format!("question {n}")}]});
        let gw = &gw;
        async move { chat_as(gw, KEY, &body, &[]).await.status().as_u16() }
    });
    let statuses = futures::future::join_all(asks).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let shown = gw.admin_json(&gw.admin_token(), "/admin/api/cache").await;
    let (entries, bytes) = (shown["entries"].as_u64().unwrap(), shown["bytes"].as_u64().unwrap());
    assert!(bytes <= 1 << 20, "{bytes} bytes held");
    assert!((1..=5).contains(&entries), "{entries} entries of ~200 KB");
}

#[tokio::test]
async fn hits_cost_no_quota_unless_the_setting_says_they_count() {
    for counted in [false, true] {
        let mock = MockUpstream::start().await;
        let yaml = config(&mock, &format!(", hits_count_against_quotas: {counted}")).replace(
            "{name: tester, key: sk-test-gateway-key-0001, models: ['*']}",
            "{name: tester, key: sk-test-gateway-key-0001, models: ['*'], token_quota: 1000, period: day}",
        );
        let gw = TestGateway::start(&yaml).await;
        let used =
            || async { gw.admin_json(&gw.admin_token(), "/admin/api/keys/tester").await["used"].as_u64().unwrap() };
        let body = ask("fixture", false);
        assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("miss"));
        let after_miss = used().await;
        assert!(after_miss > 0, "the upstream answer counts");
        for _ in 0..3 {
            assert_eq!(cache_header(&chat_as(&gw, KEY, &body, &[]).await).as_deref(), Some("hit"));
        }
        let expected = if counted { after_miss * 4 } else { after_miss };
        assert_eq!(used().await, expected, "hits_count_against_quotas: {counted}");
    }
}
