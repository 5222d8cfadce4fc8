//! Issue 32 (hardening, round two): the newer surfaces — metrics, stored responses,
//! count_tokens, detected models, native pass-through, the admin token, replicas — against
//! hostile clients and upstreams, each proven by sending the bad input for real.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard::scheduler::ManualClock;

use crate::support::binary::Binary;
use crate::support::faulty::Canned;
use crate::support::gateway::shared_cache;
use crate::support::{KEY, MockUpstream, TestGateway};

const ADMIN: &str = "adm-surfaces-token-000000001";
/// A key with a small lifetime token quota.
const PAYER: &str = "sk-surfaces-payer-key-0002";

/// A config with `tester` (every model), `payer` (a quota of `payer_quota` tokens), the admin
/// token, and `rest`.
fn config(payer_quota: u64, rest: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\nadmin_token: {ADMIN}\nkeys:\n  - {{name: tester, key: {KEY}, models: ['*']}}\n  - {{name: payer, key: {PAYER}, models: ['*'], token_quota: {payer_quota}}}\n{rest}",
        cache = shared_cache().display()
    )
}

fn mock_sources(mock: &MockUpstream) -> String {
    format!(
        "sources:\n  - {{name: oai, base_url: '{url}', models: [{{name: m, upstream: fixture}}, {{name: m2, upstream: fixture}}, {{name: m3, upstream: fixture}}, {{name: m4, upstream: fixture}}]}}\n\
         \x20 - {{name: claude, base_url: '{url}', adapter: anthropic, models: [{{name: claude, upstream: claude-code}}]}}\n\
         \x20 - {{name: resp, base_url: '{url}', adapter: openai-responses, models: [{{name: native-resp, upstream: resp-model}}]}}\n\
         \x20 - {{name: emb, base_url: '{url}', models: [{{name: emb, kind: embedding}}, {{name: img, kind: image}}]}}\n",
        url = mock.url
    )
}

async fn scrape(url: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(format!("{url}/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

async fn metrics_text(url: &str) -> String {
    let response = scrape(url, Some(ADMIN)).await;
    assert_eq!(response.status(), 200);
    response.text().await.unwrap()
}

/// The values label `label` takes in family `family`'s samples.
fn label_values(text: &str, family: &str, label: &str) -> BTreeSet<String> {
    let lines = text.lines().filter(|l| l.starts_with(family) && !l.starts_with('#'));
    let needle = format!("{label}=\"");
    lines
        .filter_map(|l| l.split_once(&needle).map(|(_, rest)| rest.split('"').next().unwrap_or_default().to_string()))
        .collect()
}

/// The sum of the samples of `name` whose line contains every one of `labels`.
fn sample_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

async fn post(url: &str, path: &str, secret: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new().post(format!("{url}{path}")).bearer_auth(secret).json(body).send().await.unwrap()
}

async fn status_json(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

async fn admin(gw: &TestGateway, method: reqwest::Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", gw.url)).bearer_auth(ADMIN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn made_up_model_names_never_become_metric_labels_and_long_names_are_refused_at_every_door() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(1_000_000, &format!("default_model: AUTO\n{}", mock_sources(&mock)))).await;
    let (status, _) =
        admin(&gw, reqwest::Method::PUT, "/admin/api/auto", Some(json!({"slots": [{"model": "m"}]}))).await;
    assert_eq!(status, 200);
    // 300 names nobody serves fall back to AUTO; each is served.
    for i in 0..300 {
        let body = json!({"model": format!("made-up-{i}-\u{202e}"), "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(post(&gw.url, "/v1/chat/completions", KEY, &body).await.status(), 200);
    }
    let text = metrics_text(&gw.url).await;
    let requested = label_values(&text, "gen_ai_server_request_duration", "gen_ai_request_model");
    assert_eq!(requested, BTreeSet::from(["AUTO".to_string()]), "the fallback is labelled by what it resolved to");
    assert!(!text.contains("made-up"), "no client string in any family");

    // A name past 256 bytes is refused at every door, naming the limit, in the door's format.
    let long = "x".repeat(257);
    let chat = json!({"model": long, "messages": [{"role": "user", "content": "hi"}]});
    let messages = json!({"model": long, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    let doors = [
        ("/v1/chat/completions", chat.clone()),
        ("/v1/messages", messages.clone()),
        ("/v1/messages/count_tokens", messages),
        ("/v1/responses", json!({"model": long, "input": "hi"})),
        ("/v1/embeddings", json!({"model": long, "input": "hi"})),
        ("/v1/images/generations", json!({"model": long, "prompt": "a cat"})),
    ];
    for (path, body) in doors {
        let (status, error) = status_json(post(&gw.url, path, KEY, &body).await).await;
        assert_eq!(status, 400, "{path}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("at most 256 bytes"), "{path}: {error}");
        if path.starts_with("/v1/messages") {
            assert_eq!(error["type"], "error", "Anthropic's error shape at {path}: {error}");
        } else {
            assert_eq!(error["error"]["param"], "model", "{path}: {error}");
        }
    }
    // Refusals show in the client-request metric, by door and status; the long name nowhere.
    let text = metrics_text(&gw.url).await;
    assert!(!text.contains(&long));
    let refused = sample_sum(
        &text,
        "http_server_request_duration_seconds_count",
        &["http_route=\"/v1/chat/completions\"", "http_response_status_code=\"400\""],
    );
    assert_eq!(refused, 1.0, "{text}");
}

#[tokio::test]
async fn each_metric_family_holds_a_capped_number_of_label_sets_and_counts_what_it_folds() {
    let mock = MockUpstream::start().await;
    let rest = format!("metrics: {{max_label_sets: 2}}\n{}", mock_sources(&mock));
    let gw = TestGateway::start(&config(1_000_000, &rest)).await;
    for model in ["m", "m2", "m3", "m4"] {
        let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(post(&gw.url, "/v1/chat/completions", KEY, &body).await.status(), 200);
    }
    let text = metrics_text(&gw.url).await;
    let requested = label_values(&text, "switchyard_attempts_total", "gen_ai_request_model");
    assert_eq!(requested, BTreeSet::from(["m".to_string(), "m2".to_string(), "other".to_string()]), "{text}");
    assert_eq!(sample_sum(&text, "switchyard_attempts_total", &["gen_ai_request_model=\"other\""]), 2.0);
    assert_eq!(sample_sum(&text, "switchyard_metric_series_folded_total", &["family=\"gen_ai_attempts\""]), 2.0);
}

#[tokio::test]
async fn refused_requests_show_in_the_client_request_metric_with_their_status_and_error_type() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(1, &mock_sources(&mock))).await;
    let chat = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(post(&gw.url, "/v1/chat/completions", "sk-wrong", &chat("m")).await.status(), 401);
    assert_eq!(post(&gw.url, "/v1/chat/completions", KEY, &chat("nobody-serves-this")).await.status(), 404);
    // `payer` spends its one token, then is refused.
    assert_eq!(post(&gw.url, "/v1/chat/completions", PAYER, &chat("m")).await.status(), 200);
    assert_eq!(post(&gw.url, "/v1/chat/completions", PAYER, &chat("m")).await.status(), 429);
    let anthropic = json!({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(post(&gw.url, "/v1/messages", KEY, &anthropic).await.status(), 404);
    let text = metrics_text(&gw.url).await;
    let count = |route: &str, status: &str, error: &str| {
        sample_sum(
            &text,
            "http_server_request_duration_seconds_count",
            &[
                &format!("http_route=\"{route}\""),
                &format!("http_response_status_code=\"{status}\""),
                &format!("error_type=\"{error}\""),
            ],
        )
    };
    assert_eq!(count("/v1/chat/completions", "401", "authentication_error"), 1.0, "{text}");
    assert_eq!(count("/v1/chat/completions", "404", "invalid_request_error"), 1.0);
    assert_eq!(count("/v1/chat/completions", "429", "insufficient_quota"), 1.0);
    assert_eq!(count("/v1/chat/completions", "200", ""), 1.0);
    assert_eq!(count("/v1/messages", "404", "invalid_request_error"), 1.0);
    let methods = label_values(&text, "http_server_request_duration_seconds_count", "http_request_method");
    assert_eq!(methods, BTreeSet::from(["POST".to_string()]));
}

#[tokio::test]
async fn metrics_need_a_token_on_the_main_listener_and_a_tokenless_scrape_address_checks_host_and_proxies() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(
        1_000_000,
        &format!("metrics: {{token: scrape-token-0123456789abcdef}}\n{}", mock_sources(&mock)),
    ))
    .await;
    // Being on loopback is no credential: a proxy on the same host makes everyone loopback.
    assert_eq!(scrape(&gw.url, None).await.status(), 401);
    assert_eq!(scrape(&gw.url, Some("wrong")).await.status(), 401);
    assert_eq!(scrape(&gw.url, Some("scrape-token-0123456789abcdef")).await.status(), 200);
    assert_eq!(scrape(&gw.url, Some(ADMIN)).await.status(), 200);

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let own = TestGateway::start(&config(
        1_000_000,
        &format!("metrics: {{listen: '127.0.0.1:{port}', hosts: [metrics.internal]}}\n{}", mock_sources(&mock)),
    ))
    .await;
    let at = format!("http://127.0.0.1:{port}/metrics");
    let client = reqwest::Client::new();
    assert_eq!(client.get(&at).send().await.unwrap().status(), 200, "tokenless on the address chosen for it");
    assert_eq!(client.get(&at).header("host", "metrics.internal:9090").send().await.unwrap().status(), 200);
    // A page that rebound its own name to this address sends that name.
    let rebound = client.get(&at).header("host", "attacker.example").send().await.unwrap();
    assert_eq!(rebound.status(), 403);
    for header in ["x-forwarded-for", "forwarded"] {
        let proxied = client.get(&at).header(header, "for=198.51.100.7").send().await.unwrap();
        assert_eq!(proxied.status(), 403, "{header}");
        assert!(proxied.text().await.unwrap().contains("metrics.token"));
    }
    drop(own);
}

#[tokio::test]
async fn wrong_admin_tokens_are_slowed_per_address_and_a_short_admin_token_is_refused_off_loopback() {
    let clock = Arc::new(ManualClock::at(1_000_000));
    let gw = TestGateway::start_with_clock(tempfile::tempdir().unwrap(), &config(1, ""), clock.clone()).await;
    let get = |token: &'static str| {
        let url = format!("{}/admin/api/keys", gw.url);
        async move { reqwest::Client::new().get(url).bearer_auth(token).send().await.unwrap() }
    };
    for _ in 0..10 {
        assert_eq!(get("guess").await.status(), 401);
    }
    let held = get(ADMIN).await;
    assert_eq!(held.status(), 429, "even the right token waits once the address guessed too often");
    assert_eq!(held.headers()["retry-after"], "60");
    clock.advance(Duration::from_secs(61));
    assert_eq!(get(ADMIN).await.status(), 200);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        format!("listen: 0.0.0.0:8080\ndata_dir: {}\nadmin_token: short-token\n", dir.path().display()),
    )
    .unwrap();
    let error = switchyard::startup::load_config(&file).unwrap_err().to_string();
    assert!(error.contains("admin_token") && error.contains("shorter than 24"), "{error}");
}

/// count_tokens with `max_concurrent: 1` and `rpm: 2`: 20 parallel calls reach the upstream at
/// most twice (the rest are estimated), each upstream call is logged, and a spent key is refused.
#[tokio::test]
async fn count_tokens_is_admitted_like_any_attempt() {
    let mock = MockUpstream::start().await;
    let rest = format!(
        "sources:\n  - {{name: claude, base_url: '{url}', adapter: anthropic, max_concurrent: 1, rpm: 2, models: [{{name: claude, upstream: claude-code}}]}}\n\
         \x20 - {{name: oai, base_url: '{url}', models: [{{name: m, upstream: fixture}}]}}\n",
        url = mock.url
    );
    let gw = TestGateway::start(&config(5, &rest)).await;
    let body = json!({"model": "claude", "messages": [{"role": "user", "content": "count me"}]});
    let calls = (0..20).map(|_| post(&gw.url, "/v1/messages/count_tokens", KEY, &body));
    let answers = futures::future::join_all(calls).await;
    let mut estimated = 0;
    for answer in answers {
        assert_eq!(answer.status(), 200);
        estimated += usize::from(answer.headers().contains_key("x-switchyard-estimate"));
    }
    let upstream = mock.state.requests().iter().filter(|r| r.body["messages"][0]["content"] == "count me").count();
    assert_eq!(upstream, 2, "rpm 2 lets two through");
    assert_eq!(estimated, 18);
    let (_, logs) = admin(&gw, reqwest::Method::GET, "/admin/api/logs?source=claude", None).await;
    assert_eq!(logs["total"], 2, "{logs}");
    assert_eq!(logs["rows"][0]["mode"], "count_tokens");
    assert_eq!(logs["rows"][0]["tokens_in"], 0);
    let text = metrics_text(&gw.url).await;
    assert_eq!(sample_sum(&text, "switchyard_attempts_total", &["gen_ai_operation_name=\"count_tokens\""]), 2.0);

    // `payer` spends its 5 tokens on a chat; counting is then refused too.
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(post(&gw.url, "/v1/chat/completions", PAYER, &chat).await.status(), 200);
    let (status, error) = status_json(post(&gw.url, "/v1/messages/count_tokens", PAYER, &body).await).await;
    assert_eq!(status, 429, "{error}");
    assert_eq!(error["type"], "error", "in Anthropic's format: {error}");
}

/// A Responses client with an 8 MiB input item of a type a chat upstream cannot take: the item
/// is not stored (it never went upstream), an explicit `store: true` larger than a stored turn
/// may be is refused, and a key's stored bytes per day are capped and shown to the admin.
#[tokio::test]
async fn stored_responses_keep_only_what_went_upstream_within_a_turn_and_a_days_bytes() {
    let mock = MockUpstream::start().await;
    let rest = format!(
        "body_limit_mb: 16\nstored_responses: {{max_turn_kb: 64, max_mb_per_key_per_day: 1}}\n{}",
        mock_sources(&mock)
    );
    let gw = TestGateway::start(&config(1_000_000, &rest)).await;
    let junk = json!({"type": "made_up_item", "data": "j".repeat(8 << 20)});
    let turn = |store: Option<bool>, input: Value| {
        let mut body = json!({"model": "m", "input": input});
        if let Some(store) = store {
            body["store"] = json!(store);
        }
        body
    };
    let with_junk = json!([junk, {"role": "user", "content": "hi"}]);
    let (status, error) =
        status_json(post(&gw.url, "/v1/responses", KEY, &turn(Some(true), with_junk.clone())).await).await;
    assert_eq!(status, 413, "{error}");
    assert_eq!(error["error"]["code"], "turn_too_large_to_store");
    for _ in 0..10 {
        let served = post(&gw.url, "/v1/responses", KEY, &turn(None, with_junk.clone())).await;
        assert_eq!(served.status(), 200);
        assert_eq!(served.headers()["x-switchyard-not-stored"], "turn_too_large_to_store");
    }
    let on_disk: u64 =
        std::fs::read_dir(gw.data_dir()).unwrap().filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();
    eprintln!("data_dir after ten 8 MiB junk items: {on_disk} bytes");
    assert!(on_disk < 4 << 20, "ten 8 MiB items stored nothing of theirs: {on_disk} bytes in data_dir");

    // A small unknown item is left out of the stored turn: only what went upstream is kept.
    let small_junk = json!([{"type": "made_up_item", "data": "k".repeat(30_000)}, {"role": "user", "content": "hi"}]);
    let (status, stored) = status_json(post(&gw.url, "/v1/responses", KEY, &turn(None, small_junk)).await).await;
    assert_eq!(status, 200);
    let (_, key) = admin(&gw, reqwest::Method::GET, "/admin/api/keys/tester", None).await;
    let bytes = key["stored_response_bytes_today"].as_u64().unwrap();
    assert!(bytes > 0 && bytes < 10_000, "the 30 KB item was not stored: {bytes} bytes");
    let id = stored["id"].as_str().unwrap();
    let read =
        reqwest::Client::new().get(format!("{}/v1/responses/{id}", gw.url)).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(read.status(), 200);

    // 40 KB turns: once the day's 1 MiB is reached, storing stops (served, the answer says so).
    let big = json!([{"role": "user", "content": "p".repeat(40_000)}]);
    let mut refused_at = None;
    for i in 0..60 {
        let response = post(&gw.url, "/v1/responses", KEY, &turn(None, big.clone())).await;
        assert_eq!(response.status(), 200);
        if response.headers().contains_key("x-switchyard-not-stored") {
            assert_eq!(response.headers()["x-switchyard-not-stored"], "stored_responses_quota_exceeded");
            refused_at = Some(i);
            break;
        }
    }
    let (_, key) = admin(&gw, reqwest::Method::GET, "/admin/api/keys/tester", None).await;
    assert!(refused_at.is_some_and(|i| i >= 20), "{refused_at:?}: {key}");
    let (status, error) = status_json(post(&gw.url, "/v1/responses", KEY, &turn(Some(true), big)).await).await;
    assert_eq!(status, 429, "an explicit store is refused: {error}");
    assert_eq!(error["error"]["code"], "stored_responses_quota_exceeded");
    let (_, key) = admin(&gw, reqwest::Method::GET, "/admin/api/keys/tester", None).await;
    let bytes = key["stored_response_bytes_today"].as_u64().unwrap();
    assert!(((1 << 20) - (64 << 10)..=1 << 20).contains(&bytes), "the day's MiB, no more: {bytes}");
    let db = std::fs::metadata(gw.data_dir().join("state.db")).map(|m| m.len()).unwrap_or(0);
    assert!(db < 8 << 20, "the 8 MiB item never reached the disk: state.db is {db} bytes");
}

/// Turns belong to the key that made them, by its secret: a new key given a deleted key's
/// name reads nothing of it, and an upstream repeating its response ids moves no turn between
/// keys.
#[tokio::test]
async fn stored_turns_belong_to_the_key_not_its_name_nor_the_upstreams_id() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(1_000_000, &mock_sources(&mock))).await;
    let make_key = || async {
        let (status, made) = admin(&gw, reqwest::Method::POST, "/admin/api/keys", Some(json!({"name": "alice"}))).await;
        assert_eq!(status, 201);
        made["key"].as_str().unwrap().to_string()
    };
    let read = |secret: String, id: String| {
        let url = format!("{}/v1/responses/{id}", gw.url);
        async move { reqwest::Client::new().get(url).bearer_auth(secret).send().await.unwrap().status() }
    };
    let first = make_key().await;
    let (status, stored) =
        status_json(post(&gw.url, "/v1/responses", &first, &json!({"model": "m", "input": "secret plans"})).await)
            .await;
    assert_eq!(status, 200);
    let id = stored["id"].as_str().unwrap().to_string();
    assert_eq!(read(first.clone(), id.clone()).await, 200);
    assert_eq!(admin(&gw, reqwest::Method::DELETE, "/admin/api/keys/alice", None).await.0, 204);
    let second = make_key().await;
    assert_eq!(read(second, id).await, 404, "the new alice reads nothing of the old one's");

    // The Responses mock answers every request with the same response id.
    let native = json!({"model": "native-resp", "input": "hi"});
    let (_, a) = status_json(post(&gw.url, "/v1/responses", KEY, &native).await).await;
    let (_, b) = status_json(post(&gw.url, "/v1/responses", PAYER, &native).await).await;
    assert_eq!(a["id"], b["id"], "the upstream repeats its id");
    let id = a["id"].as_str().unwrap().to_string();
    assert_eq!(read(KEY.to_string(), id.clone()).await, 200, "the first key's turn stays its own");
    assert_eq!(read(PAYER.to_string(), id).await, 200);
}

/// An upstream with `detect_models` that lists a model a trusted source serves: plain requests
/// for it stay on the trusted source; the listed one is reachable as `source/model` only. Names
/// that would mislead an operator are not taken.
#[tokio::test]
async fn a_detecting_source_cannot_take_another_sources_model_nor_list_misleading_names() {
    let trusted = MockUpstream::start().await;
    let listed = json!({"object": "list", "data": [
        {"id": "gpt-4o", "object": "model"}, {"id": "its-own-model", "object": "model"},
        {"id": "evil\nname", "object": "model"}, {"id": "rtl\u{202e}gpt", "object": "model"},
        {"id": "other/gpt-4o", "object": "model"}, {"id": "y".repeat(300), "object": "model"},
    ]});
    let lister = Canned::start(Duration::ZERO, 200, &[("content-type", "application/json")], &listed.to_string()).await;
    let rest = format!(
        "sources:\n  - {{name: trusted, base_url: '{}', models: [{{name: gpt-4o, upstream: fixture}}]}}\n\
         \x20 - {{name: lister, base_url: '{}/v1', detect_models: true, models: []}}\n",
        trusted.url, lister.url
    );
    let gw = TestGateway::start(&config(1_000_000, &rest)).await;
    let (status, detected) = admin(&gw, reqwest::Method::POST, "/admin/api/sources/lister/detect", None).await;
    assert_eq!(status, 200, "{detected}");
    let before = lister.connections();
    for _ in 0..40 {
        let body = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(post(&gw.url, "/v1/chat/completions", KEY, &body).await.status(), 200);
    }
    assert_eq!(lister.connections(), before, "no plain gpt-4o prompt reached the detecting source");
    let (_, models) =
        status_json(reqwest::Client::new().get(format!("{}/v1/models", gw.url)).bearer_auth(KEY).send().await.unwrap())
            .await;
    let ids: BTreeSet<String> =
        models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(
        ids,
        BTreeSet::from(["gpt-4o".to_string(), "lister/gpt-4o".to_string(), "its-own-model".to_string()]),
        "misleading names are not taken; the shadowing one is listed qualified"
    );
}

#[tokio::test]
async fn a_native_pass_through_forwards_only_the_ordinary_fields_and_betas_unless_the_source_allows_more() {
    let mock = MockUpstream::start().await;
    let rest = format!(
        "sources:\n  - {{name: claude, base_url: '{url}', adapter: anthropic, models: [{{name: claude, upstream: claude-code}}]}}\n\
         \x20 - {{name: open, base_url: '{url}', adapter: anthropic, passthrough: {{fields: [mcp_servers], betas: [mcp-client-2025-04-04]}}, models: [{{name: open, upstream: claude-code}}]}}\n",
        url = mock.url
    );
    let gw = TestGateway::start(&config(1_000_000, &rest)).await;
    let send = |model: &str| {
        let body = json!({"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
            "mcp_servers": [{"type": "url", "url": "https://mcp.example/sse", "name": "x"}],
            "container": "container_011", "service_tier": "auto", "thinking": {"type": "enabled", "budget_tokens": 1024}});
        let url = format!("{}/v1/messages", gw.url);
        async move {
            reqwest::Client::new()
                .post(url)
                .header("x-api-key", KEY)
                .header("anthropic-version", "2023-06-01")
                .header(
                    "anthropic-beta",
                    "interleaved-thinking-2025-05-14,mcp-client-2025-04-04,code-execution-2025-05-22",
                )
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(send("claude").await.status(), 200);
    let seen = mock.state.requests().pop().unwrap();
    let fields: BTreeSet<&str> = seen.body.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(fields, BTreeSet::from(["model", "max_tokens", "messages", "thinking"]), "{}", seen.body);
    assert_eq!(seen.headers["anthropic-beta"], "interleaved-thinking-2025-05-14");

    assert_eq!(send("open").await.status(), 200);
    let seen = mock.state.requests().pop().unwrap();
    assert!(seen.body.get("mcp_servers").is_some() && seen.body.get("container").is_none(), "{}", seen.body);
    assert_eq!(seen.headers["anthropic-beta"], "interleaved-thinking-2025-05-14,mcp-client-2025-04-04");
}

/// Two replicas given one name (the host name both default to): the second refuses to start,
/// naming the fix; once the first is gone its name is free again.
#[tokio::test]
async fn a_second_live_replica_of_the_same_name_refuses_to_start() {
    let redis = crate::support::redis::RedisServer::start();
    let prefix = format!("n{}", std::process::id());
    let shared = format!("shared_state: {{url: \"{}\", replica: twin, sync_ms: 50, prefix: {prefix}}}\n", redis.url());
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut first = Binary::start(da.path(), &shared);
    first.assert_alive("started as `twin`").await;

    let config = db.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:0\ndata_dir: {}\ncache_dir: {}\nkeys:\n  - {{name: tester, key: {KEY}, models: ['*']}}\n{shared}",
            db.path().display(),
            shared_cache().display()
        ),
    )
    .unwrap();
    let second = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchyard")).arg("--config").arg(&config).output().unwrap()
    });
    let second = tokio::time::timeout(Duration::from_secs(30), second).await.expect("it exits").unwrap();
    assert!(!second.status.success(), "the second `twin` must not serve");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another live replica is named `twin`") && stderr.contains("shared_state.replica"),
        "{stderr}"
    );

    // Stopped cleanly, the first gives its name back: a replacement starts at once.
    assert!(first.terminate());
    let mut replacement = Binary::start(db.path(), &shared);
    replacement.assert_alive("the name was free again").await;
}

mod index_bombs {
    //! An OpenAI upstream's tool-call index bombs (a huge index, 50,000 scattered ones, and a
    //! call index flipping back and forth) through the translated doors: Anthropic and
    //! Responses clients, streamed and whole, against the real binary: bounded output, one
    //! terminal event, at most 128 calls, RSS bounded.

    use serde_json::{Value, json};

    use crate::support::binary::Binary;
    use crate::support::faulty::{Answer, Behaviour, DONE, FaultyUpstream, StreamEnd, chunk_event, usage_event};
    use crate::support::{KEY, anthropic_events};

    const MANY: u64 = 50_000;
    const SEESAW_ARGS: usize = 64 << 10;
    const SEESAW_FLIPS: usize = 2_000;
    const MAX_CALLS: usize = 128;
    const M: &str = "evil-model";
    const GUARD: std::time::Duration = std::time::Duration::from_secs(20);

    /// The tool_calls arrays of a bomb, one per stream event (a whole answer joins them).
    fn bomb(kind: &str) -> Vec<Vec<Value>> {
        let call = |i: u64, args: &str| json!({"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": "f", "arguments": args}});
        match kind {
            "max" => vec![vec![call(u64::MAX, "{}")]],
            "many" => vec![(0..MANY).map(|i| call(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), "{}")).collect()],
            "seesaw" => {
                let mut flips = vec![call(1, "")];
                for _ in 0..SEESAW_FLIPS {
                    flips.push(json!({"index": 0, "function": {"arguments": "x"}}));
                    flips.push(json!({"index": 1}));
                }
                vec![vec![call(0, &"a".repeat(SEESAW_ARGS))], flips]
            }
            _ => unreachable!(),
        }
    }

    fn upstream_bytes(kind: &str) -> usize {
        bomb(kind).iter().map(|c| json!(c).to_string().len()).sum()
    }

    fn bomb_answer(kind: &str, streaming: bool) -> Behaviour {
        let usage = Answer { model: M, text: "", prompt_tokens: 5, completion_tokens: 7 }.usage();
        let arrays = bomb(kind);
        if streaming {
            let mut events = vec![chunk_event(M, r#"{"role":"assistant","content":null}"#, None)];
            events.extend(arrays.iter().map(|c| chunk_event(M, &json!({"tool_calls": c}).to_string(), None)));
            events.extend([chunk_event(M, "{}", Some("tool_calls")), usage_event(M, &usage), DONE.to_string()]);
            Behaviour::Sse { events, end: StreamEnd::Close }
        } else {
            let calls: Vec<Value> = arrays.into_iter().flatten().collect();
            let body = json!({"id": "chatcmpl-evil", "object": "chat.completion", "created": 1, "model": M,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": "tool_calls"}],
                "usage": serde_json::from_str::<Value>(&usage).unwrap()});
            Behaviour::json(200, body.to_string())
        }
    }

    #[derive(Debug, Clone, Copy)]
    enum Door {
        Messages,
        Responses,
    }

    impl Door {
        async fn post(self, gw: &Binary, model: &str, stream: bool) -> reqwest::Response {
            let client = reqwest::Client::new();
            let request = match self {
                Door::Messages => client
                    .post(format!("{}/v1/messages", gw.url))
                    .header("x-api-key", KEY)
                    .header("anthropic-version", "2023-06-01")
                    .json(&json!({"model": model, "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": "Hi"}]})),
                Door::Responses => client
                    .post(format!("{}/v1/responses", gw.url))
                    .bearer_auth(KEY)
                    .json(&json!({"model": model, "input": "Hi", "stream": stream, "store": false})),
            };
            tokio::time::timeout(GUARD, request.send()).await.expect("an answer in time").expect("the gateway answers")
        }

        fn check(self, body: &str, stream: bool, what: &str) {
            match (self, stream) {
                (Door::Messages, true) => {
                    let events = anthropic_events(body);
                    let ends = events.iter().filter(|(n, _)| n == "message_stop" || n == "error").count();
                    assert_eq!((ends, events.last().map(|e| e.0.as_str())), (1, Some("message_stop")), "{what}");
                }
                (Door::Responses, true) => {
                    let events = anthropic_events(body);
                    let terminal = events
                        .iter()
                        .filter(|(n, _)| {
                            matches!(n.as_str(), "response.completed" | "response.incomplete" | "response.failed")
                        })
                        .count();
                    assert_eq!(terminal, 1, "{what}");
                    let calls = events
                        .iter()
                        .filter(|(n, e)| n == "response.output_item.added" && e["item"]["type"] == "function_call")
                        .count();
                    assert!(calls <= MAX_CALLS, "{what}: {calls} function_call items");
                }
                (Door::Messages, false) => {
                    assert_eq!(serde_json::from_str::<Value>(body).unwrap()["type"], "message", "{what}")
                }
                (Door::Responses, false) => {
                    assert_eq!(serde_json::from_str::<Value>(body).unwrap()["object"], "response", "{what}")
                }
            }
        }
    }

    /// Reads a body, failing as soon as it passes `cap` bytes.
    async fn read_capped(mut response: reqwest::Response, cap: usize, what: &str) -> String {
        let mut body = Vec::new();
        let read = async {
            while let Some(chunk) = response.chunk().await.expect("the body reads") {
                body.extend_from_slice(&chunk);
                assert!(body.len() <= cap, "{what}: {} bytes out, cap {cap}", body.len());
            }
        };
        tokio::time::timeout(GUARD, read).await.unwrap_or_else(|_| panic!("{what}: not read within {GUARD:?}"));
        String::from_utf8(body).unwrap()
    }

    fn peak_rss_kib(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap();
        line.trim().trim_end_matches("kB").trim().parse().unwrap()
    }

    #[tokio::test]
    async fn tool_call_index_bombs_through_the_messages_and_responses_doors_stay_bounded() {
        let upstream =
            FaultyUpstream::start(|a| bomb_answer(a.body["model"].as_str().unwrap_or_default(), a.streaming())).await;
        let dir = tempfile::tempdir().unwrap();
        let mut gw = Binary::start(
            dir.path(),
            &format!(
                "sources:\n  - {{name: evil, base_url: '{}', models: [{{name: max}}, {{name: many}}, {{name: seesaw}}]}}\n",
                upstream.url
            ),
        );
        let baseline = peak_rss_kib(gw.pid());
        for kind in ["max", "many", "seesaw"] {
            // Linear amplification at most: what the upstream sent, re-framed.
            let cap = 32 * upstream_bytes(kind) + (1 << 20);
            for stream in [true, false] {
                for door in [Door::Messages, Door::Responses] {
                    let what = format!("{door:?} {kind} stream={stream}");
                    let response = door.post(&gw, kind, stream).await;
                    assert_eq!(response.status(), 200, "{what}");
                    let body = read_capped(response, cap, &what).await;
                    door.check(&body, stream, &what);
                    gw.assert_alive(&what).await;
                }
            }
        }
        let peak = peak_rss_kib(gw.pid());
        assert!(peak < baseline + (256 << 10), "peak RSS {baseline} → {peak} KiB");
        assert_eq!(upstream.attempts(), 12);
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap();
    line.trim().trim_end_matches("kB").trim().parse().unwrap()
}

/// The release of issue 32's first defect, against the real binary: 1 MiB model names and
/// 1,500 made-up names (each falling back to AUTO) leave the series, `/metrics` and RSS as they
/// were.
#[tokio::test]
async fn the_binary_keeps_its_series_metrics_page_and_memory_bounded_under_made_up_model_names() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gw = Binary::start(
        dir.path(),
        &format!(
            "admin_token: {ADMIN}\ndefault_model: AUTO\nsources:\n  - {{name: oai, base_url: '{}', models: [{{name: m, upstream: fixture}}]}}\n",
            mock.url
        ),
    );
    let client = reqwest::Client::new();
    let auto =
        client.put(format!("{}/admin/api/auto", gw.url)).bearer_auth(ADMIN).json(&json!({"slots": [{"model": "m"}]}));
    assert_eq!(auto.send().await.unwrap().status(), 200);
    let chat = |model: String| {
        let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
        client.post(format!("{}/v1/chat/completions", gw.url)).bearer_auth(KEY).json(&body).send()
    };
    // Every label set these requests make exists before the count starts: `m`, `AUTO`, a 400.
    assert_eq!(chat("m".into()).await.unwrap().status(), 200);
    assert_eq!(chat("made-up-first".into()).await.unwrap().status(), 200);
    assert_eq!(chat("n".repeat(300)).await.unwrap().status(), 400);
    let page = |url: String| async move {
        reqwest::Client::new()
            .get(format!("{url}/metrics"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    let (before, rss_before) = (page(gw.url.clone()).await, rss_kib(gw.pid()));

    for _ in 0..20 {
        let response = chat("n".repeat(1 << 20)).await.unwrap();
        assert_eq!(response.status(), 400);
    }
    for i in 0..1500 {
        assert_eq!(chat(format!("made-up-{i}")).await.unwrap().status(), 200);
    }
    let after = page(gw.url.clone()).await;
    let rss_after = rss_kib(gw.pid());
    eprintln!(
        "series {} → {}, /metrics {} → {} bytes, RSS {} → {} KiB",
        series(&before),
        series(&after),
        before.len(),
        after.len(),
        rss_before,
        rss_after
    );
    // Only the counts moved.
    assert_eq!(series(&after), series(&before), "no new series");
    assert!(after.len() < before.len() + 4096, "{} → {}", before.len(), after.len());
    assert!(!after.contains("made-up"));
    assert!(rss_after < rss_before + 64 * 1024, "RSS {rss_before} → {rss_after} KiB");
}

/// A name nobody serves that `default_model` sends to a configured model is labelled by that
/// model, and a count_tokens call that falls back to AUTO by `AUTO`: never by the client's string.
#[tokio::test]
async fn fallbacks_are_labelled_by_what_they_resolved_to() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(1_000_000, &format!("default_model: m\n{}", mock_sources(&mock)))).await;
    for i in 0..5 {
        let body = json!({"model": format!("someone-elses-{i}"), "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(post(&gw.url, "/v1/chat/completions", KEY, &body).await.status(), 200);
    }
    let text = metrics_text(&gw.url).await;
    let requested = label_values(&text, "switchyard_attempts_total", "gen_ai_request_model");
    assert_eq!(requested, BTreeSet::from(["m".to_string()]), "{text}");
    assert!(!text.contains("someone-elses"));
}
