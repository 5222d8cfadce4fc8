//! AUTO chains, slot quotas, session affinity and rpm end to end, against a real mock upstream
//! on a hand-moved clock: tiers fall through when a quota is spent or a tier fails, the 503 says
//! what each tier got, a conversation's next turn goes back to its source, and quota use,
//! scores and bindings survive a restart.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard::scheduler::{ManualClock, Period, SlotKey};

use crate::support::{KEY, MockUpstream, TestGateway, chat_body};

/// 2026-12-03 10:00:00 UTC, the top of an hour.
const T0: u64 = 1_796_292_000_000;
const ADMIN: &str = "adm-routing-token-0001";

/// Sources `a` and `b` serving `m` (upstream `from-a` / `from-b`, or as given), keys `tester`
/// (everything) and `narrow` (only `m`), and `extra` top-level settings.
fn yaml(mock: &MockUpstream, extra: &str, a_upstream: &str, b_upstream: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\nadmin_token: {ADMIN}\n{extra}
keys:
  - {{name: tester, key: {KEY}, models: ['*']}}
  - {{name: narrow, key: sk-narrow-key-0002, models: [m]}}
sources:
  - {{name: a, base_url: '{url}', stream_whole_answers: false, rpm: 100, models: [{{name: m, upstream: {a_upstream}}}]}}
  - {{name: b, base_url: '{url}', stream_whole_answers: false, models: [{{name: m, upstream: {b_upstream}}}]}}
",
        cache = crate::support::gateway::shared_cache().display(),
        url = mock.url
    )
}

async fn start(yaml: &str, runtime: &str, clock: Arc<ManualClock>) -> TestGateway {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.yaml"), runtime).unwrap();
    TestGateway::start_with_clock(dir, yaml, clock).await
}

fn seen(mock: &MockUpstream) -> Vec<String> {
    mock.state.requests.lock().unwrap().drain(..).map(|r| r.body["model"].as_str().unwrap().to_string()).collect()
}

fn slot(source: &str) -> SlotKey {
    SlotKey { source: switchyard::config::SourceName::new(source), model: "m".into() }
}

async fn error_message(response: reqwest::Response) -> String {
    response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string()
}

const CHAIN: &str =
    "auto:\n  - {model: m, source: a, tier: 1, token_quota: 30, period: hour}\n  - {model: m, source: b, tier: 2}\n";

#[tokio::test]
async fn auto_falls_through_a_spent_quota_and_comes_back_in_the_next_window() {
    let mock = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::at(T0));
    let gw = start(&yaml(&mock, "channel_selection: order", "from-a", "from-b"), CHAIN, clock.clone()).await;

    // The JSON fixture reports 21 tokens, the SSE fixture 12: 33 ≥ 30 spends a's hour.
    assert_eq!(gw.chat(chat_body("AUTO", false)).await.status(), 200);
    assert_eq!(gw.chat(chat_body("AUTO", true)).await.text().await.unwrap(), crate::support::mock::CHAT_SSE);
    assert_eq!(seen(&mock), ["from-a", "from-a"]);
    assert_eq!(gw.gateway.scheduler.quota_used(&slot("a"), Period::Hour), 33);
    assert_eq!(gw.chat(chat_body("AUTO", false)).await.status(), 200);
    assert_eq!(seen(&mock), ["from-b"], "a's quota is spent: tier 2 serves");

    let admin = reqwest::Client::new().get(format!("{}/admin/api/health", gw.url)).bearer_auth(ADMIN);
    let health: Value = admin.send().await.unwrap().json().await.unwrap();
    let a = &health["slots"][0];
    assert_eq!(
        a["quotas"][0],
        json!({"tier": 1, "period": "hour", "token_quota": 30, "used": 33, "resets_at_ms": T0 + 3_600_000})
    );
    assert_eq!(a["state"], "healthy", "a spent quota is not a failure");

    clock.advance(Duration::from_secs(3600));
    assert_eq!(gw.chat(chat_body("AUTO", false)).await.status(), 200);
    assert_eq!(seen(&mock), ["from-a"], "a new hour: tier 1 again");
}

#[tokio::test]
async fn when_every_tier_fails_the_503_summarises_each_tier() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let clock = Arc::new(ManualClock::at(T0));
    let gw = start(&yaml(&mock, "", "flaky", "error-429"), CHAIN, clock.clone()).await;
    let response = gw.chat(chat_body("AUTO", false)).await;
    assert_eq!(response.status(), 503);
    let message = error_message(response).await;
    assert_eq!(
        message,
        "no source could serve model \"AUTO\": tier 1: a/m: source `a` answered 500: flaky upstream is down | \
         tier 2: b/m: source `b` answered 429: Rate limit reached for gpt-4o-mini in organization org-abc on \
         requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s."
    );
    // Both cool; the next request is refused without reaching the upstream, saying how long.
    let message = error_message(gw.chat(chat_body("AUTO", false)).await).await;
    assert_eq!(
        message,
        "no source could serve model \"AUTO\": tier 1: a/m: cooling down for another 5 s | tier 2: b/m: cooling down for another 30 s"
    );
    assert_eq!(seen(&mock), ["flaky", "error-429"]);
}

#[tokio::test]
async fn auto_needs_auto_in_the_key_scope_and_default_model_catches_unknown_names() {
    let mock = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::at(T0));
    let gw = start(&yaml(&mock, "default_model: AUTO", "from-a", "from-b"), CHAIN, clock).await;
    let narrow = |model: &str| {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", gw.url))
            .bearer_auth("sk-narrow-key-0002")
            .json(&chat_body(model, false))
            .send()
    };
    let response = narrow("AUTO").await.unwrap();
    assert_eq!(response.status(), 403);
    assert_eq!(error_message(response).await, "model \"AUTO\" is not allowed for this key");
    let response = narrow("gpt-unknown").await.unwrap();
    assert_eq!(response.status(), 403);
    assert_eq!(
        error_message(response).await,
        "model \"gpt-unknown\" is not in this key's model scope, so it cannot use AUTO"
    );
    assert_eq!(narrow("m").await.unwrap().status(), 200, "its own model still works");

    assert_eq!(gw.chat(chat_body("gpt-unknown", false)).await.status(), 200, "unknown names fall to AUTO");
    assert_eq!(seen(&mock), ["from-a", "from-a"]);
}

/// The conversation so far, then a new user turn.
fn next_turn(model: &str, stream: bool, answer: &str) -> Value {
    json!({"model": model, "stream": stream, "messages": [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And then?"},
    ]})
}

#[tokio::test]
async fn a_conversations_next_turn_goes_back_to_the_source_that_answered() {
    let mock = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::at(T0));
    let gw = start(&yaml(&mock, "channel_selection: order", "from-a", "from-b"), "", clock.clone()).await;

    // Turn 1 pinned to b; the fixture answers "\n\nHello there, how may I assist you today?".
    assert_eq!(gw.chat(chat_body("b/m", false)).await.status(), 200);
    let answer = "\n\nHello there, how may I assist you today?";
    assert_eq!(gw.chat(next_turn("m", false, answer)).await.status(), 200);
    assert_eq!(gw.chat(next_turn("m", false, "something else")).await.status(), 200);
    assert_eq!(seen(&mock), ["from-b", "from-b", "from-a"], "turn 2 went back to b; another conversation did not");

    // Streams bind by the answer rebuilt from their chunks: "Hello there!".
    let turn1 = gw.chat(chat_body("b/m", true)).await.text().await.unwrap();
    assert!(turn1.ends_with("data: [DONE]\n\n"));
    let turn2 = gw.chat(next_turn("m", true, "Hello there!")).await.text().await.unwrap();
    assert!(turn2.ends_with("data: [DONE]\n\n"));
    assert_eq!(seen(&mock), ["from-b", "from-b"]);

    // A bound source that cools is not used; clearing bindings forgets the conversation.
    let admin = |path: &str| reqwest::Client::new().post(format!("{}/admin/api/{path}", gw.url)).bearer_auth(ADMIN);
    let cleared: Value =
        admin("affinity/clear").json(&json!({"source": "b"})).send().await.unwrap().json().await.unwrap();
    // Four turns were bound to b; one of them was rebound to a by the "something else" turn,
    // whose answer (the same fixture) made the same fingerprint.
    assert_eq!(cleared["cleared"], 3);
    assert_eq!(gw.chat(next_turn("m", false, "Hello there!")).await.status(), 200);
    assert_eq!(seen(&mock), ["from-a"]);
}

#[tokio::test]
async fn quota_use_scores_and_bindings_survive_a_restart() {
    let mock = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::at(T0));
    let yaml = yaml(&mock, "channel_selection: order", "from-a", "from-b");
    let gw = start(&yaml, CHAIN, clock.clone()).await;
    assert_eq!(gw.chat(chat_body("AUTO", false)).await.status(), 200);
    assert_eq!(gw.chat(chat_body("AUTO", false)).await.status(), 200);
    assert_eq!(gw.chat(chat_body("b/m", false)).await.status(), 200);
    assert_eq!(seen(&mock), ["from-a", "from-a", "from-b"]);
    let stats = gw.gateway.scheduler.stats_of(&slot("a")).unwrap();
    gw.gateway.scheduler.flush();

    let gw = gw.restart(&yaml, clock).await;
    assert_eq!(gw.gateway.scheduler.quota_used(&slot("a"), Period::Hour), 42);
    assert_eq!(gw.gateway.scheduler.stats_of(&slot("a")), Some(stats));
    assert_eq!(gw.chat(chat_body("AUTO", false)).await.status(), 200);
    assert_eq!(gw.chat(next_turn("m", false, "\n\nHello there, how may I assist you today?")).await.status(), 200);
    assert_eq!(seen(&mock), ["from-b", "from-b"], "a's hour is still spent; the conversation is still bound to b");

    let admin = |path: &str| reqwest::Client::new().post(format!("{}/admin/api/{path}", gw.url)).bearer_auth(ADMIN);
    let reset: Value = admin("stats/reset").json(&json!({"source": "a"})).send().await.unwrap().json().await.unwrap();
    assert_eq!(reset["reset"], 1);
    assert_eq!(gw.gateway.scheduler.stats_of(&slot("a")), None);
    let refused = reqwest::Client::new().post(format!("{}/admin/api/stats/reset", gw.url)).send().await.unwrap();
    assert_eq!(refused.status(), 401);
}

#[tokio::test]
async fn a_source_at_its_rpm_hands_over_until_the_minute_has_passed() {
    let mock = MockUpstream::start().await;
    let clock = Arc::new(ManualClock::at(T0));
    let yaml = yaml(&mock, "channel_selection: order", "from-a", "from-b").replace("rpm: 100", "rpm: 2");
    let gw = start(&yaml, "", clock.clone()).await;
    for _ in 0..3 {
        assert_eq!(gw.chat(chat_body("m", false)).await.status(), 200);
    }
    assert_eq!(seen(&mock), ["from-a", "from-a", "from-b"], "a's third request in a minute goes to b");
    let response = gw.chat(chat_body("a/m", false)).await;
    assert_eq!(response.status(), 503);
    assert!(error_message(response).await.contains("a/m: rpm limit reached (2 requests per minute)"));
    assert!(gw.gateway.scheduler.health().is_empty(), "a busy source is not a failing one");
    clock.advance(Duration::from_secs(60));
    assert_eq!(gw.chat(chat_body("m", false)).await.status(), 200);
    assert_eq!(seen(&mock), ["from-a"]);
}
