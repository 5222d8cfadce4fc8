//! Failover and cooldowns end to end, on a hand-moved clock: a failing source cools and the next
//! serves; cooling slots are skipped in the first half of their window and probed in the second;
//! request errors are not retried elsewhere; all-failed is a 503 summary; cooldowns survive a
//! restart.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use switchyard::scheduler::{ManualClock, SlotKey};

use crate::support::{MockUpstream, TestGateway, chat_body, config_with};

const T0: u64 = 1_800_000_000_000;

fn two_sources(mock: &MockUpstream, first_upstream: &str, second_upstream: &str) -> String {
    config_with(&format!(
        "sources:\n  - name: a\n    base_url: {url}\n    models: [{{name: shared, upstream: {first_upstream}}}]\n  - name: b\n    base_url: {url}\n    models: [{{name: shared, upstream: {second_upstream}}}]\n",
        url = mock.url
    ))
}

fn upstreams_seen(mock: &MockUpstream) -> Vec<String> {
    mock.state.requests.lock().unwrap().drain(..).map(|r| r.body["model"].as_str().unwrap().to_string()).collect()
}

fn slot(source: &str) -> SlotKey {
    SlotKey { source: switchyard::config::SourceName::new(source), model: "shared".into() }
}

#[tokio::test]
async fn a_failing_source_cools_and_the_next_one_serves() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let clock = Arc::new(ManualClock::at(T0));
    let gw = TestGateway::start_with_clock(
        tempfile::tempdir().unwrap(),
        &two_sources(&mock, "flaky", "fixture"),
        clock.clone(),
    )
    .await;

    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["flaky", "fixture"], "a failed, b answered");
    assert_eq!(gw.chat(chat_body("shared", true)).await.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["fixture"], "a is cooling: not even tried");

    // Second half of a's 5 s window: a due probe goes first; it fails, a longer window opens
    // and b answers.
    clock.advance(Duration::from_secs(3));
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["flaky", "fixture"]);
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["fixture"], "one probe per window");
    let health = gw.gateway.scheduler.health();
    assert_eq!(health.len(), 1);
    assert_eq!(health[0].0, slot("a"));
    assert_eq!(health[0].1.failures, 2);
}

#[tokio::test]
async fn probes_in_the_second_half_heal_or_lengthen_the_window() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let clock = Arc::new(ManualClock::at(T0));
    let yaml = config_with(&format!(
        "sources:\n  - name: a\n    base_url: {}\n    models: [{{name: shared, upstream: flaky}}]\n",
        mock.url
    ));
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &yaml, clock.clone()).await;

    let response = gw.chat(chat_body("shared", false)).await;
    assert_eq!(response.status(), 500, "the only candidate's own error comes back as it was");
    let response = gw.chat(chat_body("shared", false)).await;
    assert_eq!(response.status(), 503, "first half of the window: silent");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "all_candidates_failed");
    assert!(body["error"]["message"].as_str().unwrap().contains("a/shared: cooling down for another 5 s"), "{body}");
    assert_eq!(upstreams_seen(&mock), ["flaky"]);

    // A failed probe opens a new, longer window (5 s → 10 s) from the probe's time.
    clock.advance(Duration::from_millis(2_500));
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 500);
    assert_eq!(upstreams_seen(&mock), ["flaky"], "the probe went through");
    let window = gw.gateway.scheduler.health()[0].1.window.unwrap();
    assert_eq!(window.until.unwrap().since(window.start), Duration::from_secs(10));

    // A successful probe clears the slot at once.
    mock.state.flaky_fails.store(false, Ordering::SeqCst);
    clock.advance(Duration::from_secs(5));
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    assert!(gw.gateway.scheduler.health().is_empty(), "healthy again");
}

#[tokio::test]
async fn request_errors_are_not_retried_elsewhere() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&two_sources(&mock, "error-400", "fixture")).await;
    let response = gw.chat(chat_body("shared", false)).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "Invalid 'messages': empty.");
    assert_eq!(upstreams_seen(&mock), ["error-400"]);
    assert!(gw.gateway.scheduler.health().is_empty(), "a bad request does not cool the source");
}

#[tokio::test]
async fn when_every_candidate_fails_the_503_says_what_each_got() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let gw = TestGateway::start(&two_sources(&mock, "flaky", "error-429")).await;
    let response = gw.chat(chat_body("shared", false)).await;
    assert_eq!(response.status(), 503);
    let message = response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("no source could serve model \"shared\": "), "{message}");
    assert!(message.contains("a/shared: source `a` answered 500: flaky upstream is down"), "{message}");
    assert!(message.contains("b/shared: source `b` answered 429: Rate limit reached"), "{message}");
    let health = gw.gateway.scheduler.health();
    let rest = |i: usize| health[i].1.window.unwrap().until.unwrap().since(health[i].1.window.unwrap().start).as_secs();
    assert_eq!((rest(0), rest(1)), (5, 30), "5xx backs off 5 s; 429 rests 30 s (Retry-After 20 s is shorter)");
}

#[tokio::test]
async fn cooldowns_survive_a_restart() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let clock = Arc::new(ManualClock::at(T0));
    let yaml = two_sources(&mock, "flaky", "fixture");
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &yaml, clock.clone()).await;
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["flaky", "fixture"]);
    gw.gateway.scheduler.flush();

    let gw = gw.restart(&yaml, clock).await;
    assert_eq!(gw.gateway.scheduler.health()[0].0, slot("a"));
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["fixture"], "the restarted gateway still rests a");
}

#[tokio::test]
async fn streams_fail_over_until_the_first_chunk_and_never_after() {
    let mock = MockUpstream::start().await;
    let yaml = config_with(&format!(
        "sources:\n  - name: a\n    base_url: {url}\n    idle_timeout_seconds: 0.3\n    models: [{{name: shared, upstream: stall}}]\n  - name: b\n    base_url: {url}\n    models: [{{name: shared, upstream: fixture}}]\n",
        url = mock.url
    ));
    let gw = TestGateway::start(&yaml).await;
    let response = gw.chat(chat_body("shared", true)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), crate::support::mock::CHAT_SSE, "b's stream, whole");
    assert_eq!(upstreams_seen(&mock), ["stall", "fixture"]);
    assert_eq!(gw.gateway.scheduler.health()[0].0, slot("a"), "the stalled source cools");
}

#[tokio::test]
async fn operators_see_slot_health_and_clear_cooldowns_with_the_admin_token() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let clock = Arc::new(ManualClock::at(T0));
    let yaml =
        two_sources(&mock, "flaky", "fixture").replace("sources:", "admin_token: adm-secret-token-0001\nsources:");
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &yaml, clock.clone()).await;
    gw.chat(chat_body("shared", false)).await;
    upstreams_seen(&mock);

    let client = reqwest::Client::new();
    let url = |path: &str| format!("{}/admin/api/{path}", gw.url);
    assert_eq!(client.get(url("health")).send().await.unwrap().status(), 401);
    assert_eq!(
        client.get(url("health")).bearer_auth(crate::support::KEY).send().await.unwrap().status(),
        401,
        "a gateway key is not the admin token"
    );
    let health = |c: reqwest::RequestBuilder| async move { c.send().await.unwrap().json::<Value>().await.unwrap() };
    let body = health(client.get(url("health")).header("x-admin-token", "adm-secret-token-0001")).await;
    assert_eq!(body["slots"][0]["source"], "a");
    assert_eq!(body["slots"][0]["state"], "cooling");
    assert_eq!(body["slots"][0]["recovers_at_ms"], T0 + 5_000);
    assert_eq!(body["slots"][0]["probe_from_ms"], T0 + 2_500);
    clock.advance(Duration::from_secs(3));
    let body = health(client.get(url("health")).bearer_auth("adm-secret-token-0001")).await;
    assert_eq!(body["slots"][0]["state"], "awaiting probe");
    assert!(!body.to_string().contains("sk-upstream"), "no secrets in admin answers");

    mock.state.flaky_fails.store(false, Ordering::SeqCst);
    let cleared = health(
        client
            .post(url("cooldowns/clear"))
            .bearer_auth("adm-secret-token-0001")
            .json(&serde_json::json!({"source": "a"})),
    )
    .await;
    assert_eq!(cleared["cleared"], 1);
    assert!(gw.gateway.scheduler.health().is_empty());
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["flaky"], "a is first again");
}

#[tokio::test]
async fn the_admin_api_is_off_with_an_empty_token() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&format!("admin_token: ''\n{}", two_sources(&mock, "flaky", "fixture"))).await;
    let response = reqwest::Client::new()
        .get(format!("{}/admin/api/health", gw.url))
        .header("x-admin-token", "anything")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn a_source_at_max_concurrent_queues_briefly_then_hands_over_to_the_next() {
    let mock = MockUpstream::start().await;
    let yaml = config_with(&format!(
        "sources:\n  - name: a\n    base_url: {url}\n    max_concurrent: 1\n    queue_timeout_seconds: 0.2\n    models: [{{name: held}}, {{name: shared, upstream: from-a}}]\n  - name: b\n    base_url: {url}\n    models: [{{name: shared, upstream: from-b}}]\n",
        url = mock.url
    ));
    let gw = TestGateway::start(&yaml).await;
    // A stream on `a` holds its only place while the upstream waits at the gate.
    let yaml_gated =
        gw.chat(serde_json::json!({"model": "a/held", "stream": true, "messages": [{"role": "user", "content": "x"}]}));
    let held = yaml_gated.await;
    assert_eq!(held.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["held"]);

    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    assert_eq!(upstreams_seen(&mock), ["from-b"], "a was full: b served, and a did not cool");
    assert!(gw.gateway.scheduler.health().is_empty());

    let response = gw.chat(chat_body("a/shared", false)).await;
    assert_eq!(response.status(), 503);
    let message = response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("a/shared: busy (all 1 of max_concurrent in use)"), "{message}");

    drop(held);
    mock.state.hung_up.notified().await;
    assert_eq!(gw.chat(chat_body("a/shared", false)).await.status(), 200, "the place came back with the stream");
    assert_eq!(upstreams_seen(&mock), ["from-a"]);
}

#[tokio::test]
async fn running_out_of_engine_instance_slots_is_busy_not_a_source_failure() {
    let mock = MockUpstream::start().await;
    let yaml = config_with(&format!(
        "sandbox: {{pool_slots: 2, sessions_per_instance: 1}}\nsources:\n  - name: a\n    base_url: {url}\n    models: [{{name: held}}, {{name: shared, upstream: fixture}}]\n",
        url = mock.url
    ));
    let gw = TestGateway::start(&yaml).await;
    // Two open streams hold the engine's only two instance slots.
    let stream = |_| {
        gw.chat(serde_json::json!({"model": "held", "stream": true, "messages": [{"role": "user", "content": "x"}]}))
    };
    let (first, second) = (stream(1).await, stream(2).await);
    assert_eq!((first.status(), second.status()), (reqwest::StatusCode::OK, reqwest::StatusCode::OK));
    upstreams_seen(&mock);

    let response = gw.chat(chat_body("shared", false)).await;
    assert_eq!(response.status(), 503);
    let message = response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("all 2 instance slots of the engine are in use"), "{message}");
    assert!(gw.gateway.scheduler.health().is_empty(), "the gateway's own capacity is not the source's fault");
    assert!(upstreams_seen(&mock).is_empty());

    drop(first);
    mock.state.hung_up.notified().await;
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200, "a slot came back with the stream");
}
