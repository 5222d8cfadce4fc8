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
    let error = switchyard::startup::load_config(&file).err().expect("refused").to_string();
    assert!(error.contains("cache.ttl_seconds"), "{error}");
    std::fs::write(&file, "listen: 127.0.0.1:0\ncache: {max_mb: 1, max_entry_kb: 4096}\n").unwrap();
    let error = switchyard::startup::load_config(&file).err().expect("refused").to_string();
    assert!(error.contains("cache.max_entry_kb"), "{error}");
}
