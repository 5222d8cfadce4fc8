//! Routes and their modes end to end against a mock upstream with a vision model and a judge:
//! auto-select fails over by priority, direct does not, groups hide routes, images become
//! descriptions, fusion gathers and judges (each strategy, streaming too), and every attempt
//! is a request-log row the admin API can query.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::support::{KEY, MockUpstream, TestGateway, assemble, openai_events};

const ADMIN: &str = "adm-modes-token-0001";

fn yaml(mock: &MockUpstream, routes: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\nadmin_token: {ADMIN}\nchannel_selection: order
keys:
  - {{name: tester, key: {KEY}, models: ['*']}}
  - {{name: teammate, key: sk-team-key-0003, models: ['*'], group: team}}
sources:
  - name: a
    base_url: '{url}'
    models:
      - {{name: m, upstream: 'say:alpha'}}
      - {{name: long, upstream: 'say:a much longer answer'}}
      - {{name: vis, upstream: vision}}
      - {{name: judge, upstream: judge}}
      - {{name: hang, upstream: hang}}
      - {{name: bad, upstream: error-500}}
      - {{name: refused, upstream: error-400}}
      - {{name: flaky, upstream: flaky}}
  - {{name: b, base_url: '{url}', models: [{{name: m, upstream: 'say:beta'}}]}}
prices: [{{source: a, model: '*', input: '1', output: '2'}}, {{source: b, model: '*', input: '3', output: '5'}}]
routes:
{routes}",
        cache = crate::support::gateway::shared_cache().display(),
        url = mock.url
    )
}

fn seen(mock: &MockUpstream) -> Vec<Value> {
    mock.state.requests.lock().unwrap().drain(..).map(|r| r.body).collect()
}

fn models_seen(mock: &MockUpstream) -> Vec<String> {
    seen(mock).iter().map(|b| b["model"].as_str().unwrap().to_string()).collect()
}

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "What is the capital of France?"}]})
}

async fn content(response: reqwest::Response) -> String {
    let body: Value = response.json().await.unwrap();
    body["choices"][0]["message"]["content"].as_str().unwrap_or_else(|| panic!("no answer: {body}")).to_string()
}

async fn streamed(response: reqwest::Response) -> String {
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let (events, done) = openai_events(&response.text().await.unwrap());
    assert!(done, "the stream ends with [DONE]");
    assemble(&events).content
}

async fn logs(gw: &TestGateway, query: &str) -> Value {
    let url = format!("{}/admin/api/logs?{query}", gw.url);
    reqwest::Client::new().get(url).bearer_auth(ADMIN).send().await.unwrap().json().await.unwrap()
}

/// The cost of the `count` log rows `query` finds, summed exactly.
async fn summed_cost(gw: &TestGateway, query: &str, count: usize) -> String {
    let page = logs(gw, query).await;
    let rows = page["rows"].as_array().unwrap();
    assert_eq!(rows.len(), count, "{page}");
    let usd = |r: &Value| switchyard::domain::Usd::parse(r["cost_usd"].as_str().expect("each call priced")).unwrap();
    let sum = rows.iter().map(usd).fold(switchyard::domain::Usd::ZERO, switchyard::domain::Usd::saturating_add);
    assert!(sum > switchyard::domain::Usd::ZERO);
    sum.to_string()
}

#[tokio::test]
async fn auto_select_fails_over_by_priority_direct_does_not_and_groups_hide_routes() {
    let mock = MockUpstream::start().await;
    let routes = "  - {alias: pick, mode: auto-select, providers: [{source: b, model: m, priority: 1}, {source: a, model: bad, priority: 0}]}
  - {alias: first, providers: [{source: b, model: m, priority: 1}, {source: a, model: bad, priority: 0}]}
  - {alias: strict, mode: auto-select, providers: [{source: a, model: refused}, {source: b, model: m, priority: 1}]}
  - {alias: pick, group: team, providers: [{source: a, model: m}]}
";
    let gw = TestGateway::start(&yaml(&mock, routes)).await;
    assert_eq!(content(gw.chat(ask("pick", false)).await).await, "beta");
    assert_eq!(models_seen(&mock), ["error-500", "say:beta"], "priority 0 first, then over to priority 1");
    assert_eq!(streamed(gw.chat(ask("pick", true)).await).await, "beta", "a/bad is cooling: b streams");

    let response = gw.chat(ask("first", false)).await;
    assert_eq!(response.status(), 503, "direct: the one provider only (cooling now), no failover");
    assert_eq!(models_seen(&mock), ["say:beta"]);

    let response = gw.chat(ask("strict", false)).await;
    assert_eq!(response.status(), 400, "a request error is not retried on the next provider");
    assert_eq!(models_seen(&mock), ["error-400"]);

    let team = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth("sk-team-key-0003")
        .json(&ask("pick", false))
        .send()
        .await
        .unwrap();
    assert_eq!(content(team).await, "alpha", "the team group's own `pick`");

    // Every attempt is a row, newest first: the stream, then the served b/m and the failed
    // a/bad of the first request.
    let page = logs(&gw, "route=pick&key=tester").await;
    let rows = page["rows"].as_array().unwrap();
    assert_eq!(page["total"], 3);
    assert_eq!((rows[2]["source"].as_str(), rows[2]["status"].as_u64()), (Some("a"), Some(500)));
    assert_eq!(rows[2]["error"], "upstream_server_error");
    assert_eq!((rows[1]["source"].as_str(), rows[1]["status"].as_u64()), (Some("b"), Some(200)));
    assert_eq!(rows[1]["mode"], "auto-select");
    assert_eq!((rows[1]["tokens_in"].as_u64(), rows[1]["tokens_out"].as_u64()), (Some(10), Some(1)));
    assert_eq!(rows[1]["request_id"], rows[2]["request_id"], "one request, two attempts");
    assert_eq!((rows[0]["stream"].as_bool(), rows[0]["tokens_out"].as_u64()), (Some(true), Some(1)));
}

fn with_images(model: &str, urls: &[&str]) -> Value {
    let mut content = vec![json!({"type": "text", "text": "What do these show?"})];
    content.extend(urls.iter().map(|u| json!({"type": "image_url", "image_url": {"url": u}})));
    json!({"model": model, "messages": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn the_adapter_mode_replaces_images_with_descriptions_from_the_vision_route() {
    let mock = MockUpstream::start().await;
    let routes = "  - {alias: eyes, providers: [{source: a, model: vis}]}
  - {alias: seeing, mode: adapter, adapter_config: {vision_alias: eyes, fallback: skip-image}, providers: [{source: b, model: m}]}
  - {alias: strict-seeing, mode: adapter, adapter_config: {vision_alias: eyes, fallback: error}, providers: [{source: b, model: m}]}
";
    let gw = TestGateway::start(&yaml(&mock, routes)).await;

    let response = gw.chat(with_images("seeing", &["https://img/1.png", "https://img/2.png"])).await;
    let cost = response.headers()["x-switchyard-cost"].to_str().unwrap().to_string();
    let id = response.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(content(response).await, "beta");
    assert_eq!(cost, summed_cost(&gw, &format!("request_id={id}"), 3).await, "the describe calls are in its cost");
    let bodies = seen(&mock);
    assert_eq!(bodies.len(), 3, "two descriptions, then the text model");
    let text_request = bodies.iter().find(|b| b["model"] == "say:beta").unwrap();
    assert_eq!(
        text_request["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What do these show?"},
            {"type": "text", "text": "[Image: a picture at https://img/1.png]"},
            {"type": "text", "text": "[Image: a picture at https://img/2.png]"},
        ])
    );

    // No images: the request passes as it was, and the vision route is not called.
    let plain = ask("seeing", false);
    assert_eq!(content(gw.chat(plain.clone()).await).await, "beta");
    let bodies = seen(&mock);
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["messages"], plain["messages"]);

    // A failed description: a placeholder (skip-image), or the error (error).
    let response = gw.chat(with_images("seeing", &["https://img/broken.png"])).await;
    assert_eq!(content(response).await, "beta");
    let text_request = seen(&mock).into_iter().find(|b| b["model"] == "say:beta").unwrap();
    assert_eq!(text_request["messages"][0]["content"][1]["text"], "[Image: description unavailable]");
    let response = gw.chat(with_images("strict-seeing", &["https://img/broken.png"])).await;
    assert_eq!(response.status(), 503, "the vision source is cooling after its failure");
    let message = response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("vision route `eyes` could not describe image 1 of the request: "), "{message}");
    assert!(!models_seen(&mock).contains(&"say:beta".to_string()), "the text model was not called");
}

fn council(strategy: &str, extra_providers: &str, min: usize) -> String {
    format!(
        "  - alias: council
    mode: fusion
    fusion_config: {{judge_alias: judge, strategy: {strategy}, min_candidates: {min}, timeout_seconds: 0.5}}
    providers: [{{source: a, model: m}}, {{source: b, model: m}}, {{source: a, model: long}}{extra_providers}]
"
    )
}

#[tokio::test]
async fn fusion_gathers_every_candidate_and_the_judge_answers() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock, &council("compare_and_synthesize", "", 2))).await;
    let response = gw.chat(ask("council", false)).await;
    assert_eq!(response.headers()["x-switchyard-fusion"], "a/m,b/m,a/long");
    let fusion_id = response.headers()["x-switchyard-fusion-id"].to_str().unwrap().to_string();
    assert_eq!(fusion_id.len(), 32);
    let cost = response.headers()["x-switchyard-cost"].to_str().unwrap().to_string();
    assert_eq!(content(response).await, "judged 3 answers: alpha + beta + a much longer answer");
    let judge_request = seen(&mock).into_iter().find(|b| b["model"] == "judge").unwrap();
    let prompt = judge_request["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.starts_with("Conversation:\nuser: What is the capital of France?\n\nCandidate answers:\n[1]\nalpha"),
        "{prompt}"
    );

    let page = logs(&gw, &format!("fusion_id={fusion_id}")).await;
    assert_eq!(page["total"], 4, "N + 1 rows share the fusion id");
    assert_eq!(cost, summed_cost(&gw, &format!("fusion_id={fusion_id}"), 4).await, "every candidate's and the judge's");
    let modes: Vec<&str> = page["rows"].as_array().unwrap().iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes.iter().filter(|m| **m == "fusion").count(), 3);
    assert_eq!(page["rows"][0]["model"], "judge", "the judge answers last");

    // Streaming clients get the judge's answer streamed.
    let response = gw.chat(ask("council", true)).await;
    assert!(response.headers().contains_key("x-switchyard-fusion-id"));
    assert_eq!(streamed(response).await, "judged 3 answers: alpha + beta + a much longer answer");
}

#[tokio::test]
async fn ranked_fusion_returns_the_best_answer_verbatim_and_majority_vote_asks_for_consensus() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock, &council("ranked", "", 2))).await;
    assert_eq!(content(gw.chat(ask("council", false)).await).await, "a much longer answer");
    let judge_request = seen(&mock).into_iter().find(|b| b["model"] == "judge").unwrap();
    assert!(judge_request["messages"][0]["content"].as_str().unwrap().contains("Rank the candidate answers"));
    assert_eq!(judge_request["stream"], true, "the judge's whole answer is asked as a stream");
    assert_eq!(streamed(gw.chat(ask("council", true)).await).await, "a much longer answer", "replayed as a stream");

    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock, &council("majority_vote", "", 2))).await;
    assert_eq!(gw.chat(ask("council", false)).await.status(), 200);
    let judge_request = seen(&mock).into_iter().find(|b| b["model"] == "judge").unwrap();
    assert!(judge_request["messages"][0]["content"].as_str().unwrap().contains("most of the candidate answers"));
}

#[tokio::test]
async fn fusion_tolerates_failed_candidates_down_to_min_candidates() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let extra = ", {source: a, model: hang}, {source: a, model: flaky}";
    let gw = TestGateway::start(&yaml(&mock, &council("compare_and_synthesize", extra, 3))).await;
    let response = gw.chat(ask("council", false)).await;
    assert_eq!(response.headers()["x-switchyard-fusion"], "a/m,b/m,a/long", "the two that failed are not named");
    assert_eq!(content(response).await, "judged 3 answers: alpha + beta + a much longer answer");

    let gw = TestGateway::start(&yaml(&mock, &council("compare_and_synthesize", extra, 4))).await;
    let response = gw.chat(ask("council", false)).await;
    assert_eq!(response.status(), 503);
    let message = response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("fusion route `council` needs 4 answers and got 3: "), "{message}");
    assert!(message.contains("a/hang: no answer within 0.5 s"), "{message}");
    assert!(message.contains("a/flaky: flaky upstream is down"), "{message}");
}

#[tokio::test]
async fn logs_page_and_filter() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock, "  - {alias: one, providers: [{source: a, model: m}]}\n")).await;
    for model in ["one", "b/m", "one"] {
        assert_eq!(gw.chat(ask(model, false)).await.status(), 200);
    }
    let first = logs(&gw, "limit=2").await;
    assert_eq!((first["total"].as_u64(), first["rows"].as_array().unwrap().len()), (Some(3), 2));
    let rest = logs(&gw, "limit=2&offset=2").await;
    assert_eq!(rest["rows"].as_array().unwrap().len(), 1);
    assert!(rest["rows"][0]["id"].as_i64() < first["rows"][1]["id"].as_i64(), "newest first");
    assert_eq!(logs(&gw, "source=b").await["total"], 1);
    assert_eq!(logs(&gw, "route=one&status=200&errors=false").await["total"], 2);
    let bad = reqwest::Client::new()
        .get(format!("{}/admin/api/logs?colour=red", gw.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let refused = reqwest::Client::new().get(format!("{}/admin/api/logs", gw.url)).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let stats: Value = reqwest::Client::new()
        .get(format!("{}/admin/api/stats?since_ms=0", gw.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["sources"][0]["source"], "a");
    assert_eq!(stats["sources"][0]["requests"], 2);
    assert_eq!(stats["sources"][0]["tokens_in"], 20);
}
