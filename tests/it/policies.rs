//! Policy plugins end to end, with the built-in components in the real sandbox: personal data
//! redacted on the way up, in whole answers and across the chunks of a stream (OpenAI and
//! Anthropic clients), secrets refused before they leave in each client's protocol, a key's
//! limits and a source's deny-list, decisions in the log rows, the metrics and the admin API,
//! and a config that names what does not exist refused at start.

use serde_json::{Value, json};
use switchyard::state::LogQuery;

use crate::support::gateway::shared_cache;
use crate::support::{KEY, MockUpstream, TestGateway, anthropic_events, assemble, openai_events};

const PLAIN_KEY: &str = "sk-test-gateway-key-plain-0001";

/// An email split across the two chunks the mock streams this model's text in.
const SAYS_EMAIL: &str = "say:Write to alice.smith@example.com today";

/// An email split across three chunks (the mock's `say3:` streams thirds).
const SAYS_EMAIL_IN_THREE: &str = "say3:Mail alice.smith@example.com now";

/// An answer carrying an AWS access key id.
const SAYS_SECRET: &str = "say:Your key is AKIAIOSFODNN7EXAMPLE";

fn config(mock: &MockUpstream) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\n\
         policies:\n\
         \x20 - {{name: pii, plugin: redact-pii, global: true}}\n\
         \x20 - {{name: secrets, plugin: block-secrets}}\n\
         \x20 - {{name: caps, plugin: limits, settings: {{max_tokens: '256', allowed_tools: lookup}}}}\n\
         \x20 - {{name: words, plugin: deny-list, settings: {{words: 'project bluebird'}}}}\n\
         keys:\n\
         \x20 - {{name: tester, key: {KEY}, models: ['*'], policies: [secrets, caps]}}\n\
         \x20 - {{name: plain, key: {PLAIN_KEY}, models: ['*']}}\n\
         sources:\n\
         \x20 - {{name: mock, base_url: '{url}', api_key: sk-upstream-secret-0123456789, stream_whole_answers: false,\n\
         \x20     models: [{{name: fixture}}, {{name: '{SAYS_EMAIL}'}}, {{name: '{SAYS_SECRET}'}}, {{name: '{SAYS_EMAIL_IN_THREE}'}}]}}\n\
         \x20 - {{name: guarded, base_url: '{url}', api_key: sk-upstream-secret-0123456789, policies: [words],\n\
         \x20     models: [{{name: guarded-model, upstream: fixture}}]}}\n",
        cache = shared_cache().display(),
        url = mock.url,
    )
}

async fn chat_as(gw: &TestGateway, key: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

fn rows_of(gw: &TestGateway, request_id: &str) -> Vec<switchyard::state::LogRow> {
    let query = LogQuery { request_id: Some(request_id.to_string()), ..LogQuery::default() };
    gw.gateway.state.query_logs(&query).unwrap().rows
}

fn request_id(response: &reqwest::Response) -> String {
    response.headers()["x-request-id"].to_str().unwrap().to_string()
}

#[tokio::test]
async fn personal_data_is_redacted_going_up_in_whole_answers_and_across_stream_chunks() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock)).await;

    // On the way up: the upstream never sees the card or the address.
    let asked = json!({"model": "fixture", "messages": [{"role": "user",
        "content": "My card is 4111 1111 1111 1111, write to bob@example.com"}]});
    let response = chat_as(&gw, PLAIN_KEY, &asked).await;
    assert_eq!(response.status(), 200);
    let id = request_id(&response);
    let sent = mock.state.requests().last().unwrap().body["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(!sent.contains("4111") && !sent.contains("bob@example.com"), "sent upstream: {sent}");
    assert!(sent.contains("[CARD]") && sent.contains("[EMAIL]"), "sent upstream: {sent}");
    let rows = rows_of(&gw, &id);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].policy.as_deref(), Some("pii:request:rewrite"));
    assert!(!format!("{rows:?}").contains("bob@"), "the row never holds the redacted text");

    // A whole answer.
    let whole: Value =
        chat_as(&gw, PLAIN_KEY, &json!({"model": SAYS_EMAIL, "messages": [{"role": "user", "content": "hi"}]}))
            .await
            .json()
            .await
            .unwrap();
    assert_eq!(whole["choices"][0]["message"]["content"], "Write to [EMAIL] today");

    // A stream whose address arrives in two chunks: held back, caught whole, never sent.
    let streamed = json!({"model": SAYS_EMAIL, "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}]});
    let response = chat_as(&gw, PLAIN_KEY, &streamed).await;
    let id = request_id(&response);
    let (events, done) = openai_events(&response.text().await.unwrap());
    assert!(done);
    let pieces: Vec<&str> = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(pieces.iter().all(|p| !p.contains("alice") && !p.contains("example.com")), "{pieces:?}");
    let answer = assemble(&events);
    assert_eq!(answer.content, "Write to [EMAIL] today");
    assert_eq!(answer.finish.as_deref(), Some("stop"));
    assert!(answer.usage.is_some(), "usage still comes");
    let rows = rows_of(&gw, &id);
    assert_eq!(rows[0].status, Some(200));
    assert_eq!(rows[0].policy.as_deref(), Some("pii:stream:rewrite"));

    // Split across three chunks: each third alone shows no address, the whole does.
    let streamed = json!({"model": SAYS_EMAIL_IN_THREE, "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}]});
    let (events, done) = openai_events(&chat_as(&gw, PLAIN_KEY, &streamed).await.text().await.unwrap());
    assert!(done);
    let answer = assemble(&events);
    assert_eq!(answer.content, "Mail [EMAIL] now");
    assert_eq!(answer.usage.as_ref().unwrap()["prompt_tokens"], 10, "usage is counted and passed on");

    // An Anthropic client streaming the same: its own events, the same redaction.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", gw.url))
        .header("x-api-key", PLAIN_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": SAYS_EMAIL, "max_tokens": 100, "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let events = anthropic_events(&response.text().await.unwrap());
    let text: String = events.iter().filter_map(|(_, data)| data["delta"]["text"].as_str()).collect();
    assert_eq!(text, "Write to [EMAIL] today");
    assert_eq!(events.last().map(|(name, _)| name.as_str()), Some("message_stop"));

    // Counted in the metrics, by policy, hook and action.
    let metrics = gw.scrape_metrics().await.text().await.unwrap();
    for hook in ["request", "answer", "stream"] {
        let line = format!("switchyard_policy_decisions_total{{policy=\"pii\",hook=\"{hook}\",action=\"rewrite\"}}");
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
}

#[tokio::test]
async fn a_secret_is_refused_before_it_leaves_in_each_clients_protocol() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock)).await;
    let leaky = "deploy with AKIAIOSFODNN7EXAMPLE please";

    let response =
        chat_as(&gw, KEY, &json!({"model": "fixture", "messages": [{"role": "user", "content": leaky}]})).await;
    assert_eq!(response.status(), 400);
    let id = request_id(&response);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "secret_detected");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("AWS"), "names the kind of secret: {message}");
    assert!(!message.contains("AKIAIOSFODNN7EXAMPLE"), "never the secret itself");
    assert!(mock.state.requests().is_empty(), "nothing went upstream");
    let rows = rows_of(&gw, &id);
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].source.as_str(), rows[0].status), ("policy", Some(400)));
    assert_eq!(rows[0].policy.as_deref(), Some("secrets:request:deny"));

    // An Anthropic client gets Anthropic's error shape.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", gw.url))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "fixture", "max_tokens": 100, "messages": [{"role": "user", "content": leaky}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(error["error"]["message"].as_str().unwrap().contains("AWS"));

    // A Responses client, its own.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/responses", gw.url))
        .bearer_auth(KEY)
        .json(&json!({"model": "fixture", "input": leaky}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "secret_detected");
    assert!(mock.state.requests().is_empty(), "still nothing went upstream");

    // An answer carrying a secret is refused too: generated (and charged), never given.
    let asked = json!({"model": SAYS_SECRET, "messages": [{"role": "user", "content": "my key?"}]});
    let response = chat_as(&gw, KEY, &asked).await;
    assert_eq!(response.status(), 400);
    let id = request_id(&response);
    let text = response.text().await.unwrap();
    assert!(text.contains("secret_detected") && !text.contains("AKIAIOSFODNN7EXAMPLE"), "{text}");
    assert_eq!(mock.state.requests().len(), 1, "the request went; its answer did not come back");
    let rows = rows_of(&gw, &id);
    assert_eq!((rows[0].source.as_str(), rows[0].status), ("mock", Some(400)));
    assert_eq!(rows[0].error.as_deref(), Some("secret_detected"));
    assert_eq!(rows[0].policy.as_deref(), Some("secrets:answer:deny"));
    assert!(rows[0].tokens_out.unwrap() > 0, "its tokens are counted");
    // Streamed, the answer ends in an error event before the key's text is released.
    let streamed = json!({"model": SAYS_SECRET, "stream": true, "messages": [{"role": "user", "content": "my key?"}]});
    let body = chat_as(&gw, KEY, &streamed).await.text().await.unwrap();
    let events: Vec<Value> = body
        .split_terminator("\n\n")
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    let text: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(!text.contains("AKIA"), "{body}");
    assert_eq!(events.last().unwrap()["error"]["code"], "secret_detected", "{body}");
    let before = mock.state.requests().len();

    // The policy is the key's: another key's request goes (global redaction aside).
    let response =
        chat_as(&gw, PLAIN_KEY, &json!({"model": "fixture", "messages": [{"role": "user", "content": leaky}]})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(mock.state.requests().len(), before + 1);
}

#[tokio::test]
async fn a_keys_limits_and_a_sources_deny_list_hold() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config(&mock)).await;

    let greedy = json!({"model": "fixture", "max_tokens": 100000, "messages": [{"role": "user", "content": "hi"}]});
    let response = chat_as(&gw, KEY, &greedy).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "max_tokens_too_high");

    let tools = json!({"model": "fixture", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "delete_everything", "parameters": {"type": "object"}}}]});
    let response = chat_as(&gw, KEY, &tools).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "tool_not_allowed");
    assert!(error["error"]["message"].as_str().unwrap().contains("delete_everything"));
    assert!(mock.state.requests().is_empty());

    // Within the limits it is served.
    let modest = json!({"model": "fixture", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(chat_as(&gw, KEY, &modest).await.status(), 200);

    // The source `guarded` takes nothing about the project, from any key; other requests it serves.
    let secret_project =
        json!({"model": "guarded-model", "messages": [{"role": "user", "content": "Status of Project Bluebird?"}]});
    let response = chat_as(&gw, PLAIN_KEY, &secret_project).await;
    assert_eq!(response.status(), 400);
    let id = request_id(&response);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "content_denied");
    assert_eq!(mock.state.requests().len(), 1, "the refused request never reached the source");
    let row = rows_of(&gw, &id);
    assert!(row.is_empty() || row.iter().all(|r| r.status != Some(200)));
    let fine = json!({"model": "guarded-model", "messages": [{"role": "user", "content": "Status of the release?"}]});
    assert_eq!(chat_as(&gw, PLAIN_KEY, &fine).await.status(), 200);
    assert_eq!(mock.state.requests().len(), 2);

    // The admin API lists what is loaded.
    let listed = gw.admin_json(&gw.admin_token(), "/admin/api/policies").await;
    let names: Vec<&str> = listed["policies"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["caps", "pii", "secrets", "words"]);
    let pii = &listed["policies"][1];
    assert_eq!((pii["global"].as_bool(), pii["on_error"].as_str()), (Some(true), Some("closed")));
    assert_eq!(pii["hooks"], json!(["request", "answer", "stream"]));
}

#[tokio::test]
async fn a_config_naming_a_policy_that_does_not_exist_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let cases = [
        (
            "policies: [{name: p, plugin: redact-everything}]\n",
            "policies[0].plugin",
            "neither a built-in policy nor a `.wasm` file",
        ),
        (
            "keys: [{name: k, key: sk-test-gateway-key-0001, models: ['*'], policies: [nope]}]\n",
            "keys[0].policies[0]",
            "no policy named `nope`",
        ),
        ("policies: [{name: p, plugin: limits}, {name: p, plugin: deny-list}]\n", "policies[1].name", "used twice"),
    ];
    for (yaml, field, message) in cases {
        std::fs::write(&file, format!("data_dir: {}\n{yaml}", dir.path().display())).unwrap();
        let Err(error) = switchyard::startup::load_config(&file) else { panic!("refused: {yaml}") };
        let error = error.to_string();
        assert!(error.contains(field) && error.contains(message), "{field} / {message} in:\n{error}");
    }

    // A component that is not a policy (an adapter) is named at start, with the world it lacks.
    let adapter = crate::support::gateway::guest_wasm("openai");
    std::fs::write(
        &file,
        format!(
            "data_dir: {d}\npolicies: [{{name: wrong, plugin: '{w}'}}]\n",
            d = dir.path().display(),
            w = adapter.display()
        ),
    )
    .unwrap();
    let config = switchyard::startup::load_config(&file).unwrap();
    let Err(error) =
        switchyard::startup::build_with_clock(config, std::sync::Arc::new(switchyard::scheduler::SystemClock)).await
    else {
        panic!("an adapter is not a policy")
    };
    let error = format!("{error:#}");
    assert!(error.contains("`wrong`") && error.contains("policy-world"), "{error}");
}

/// One key per misbehaviour of the hostile policy fixture, each failing closed unless named open.
fn hostile_config(mock: &MockUpstream) -> String {
    let wasm = crate::support::gateway::guest_wasm("hostile_policy");
    let policy = |name: &str, mode: &str, extra: &str| {
        format!("  - {{name: {name}, plugin: '{}', settings: {{mode: {mode}}}{extra}}}\n", wasm.display())
    };
    let key = |name: &str| {
        format!("  - {{name: {name}, key: sk-test-policy-{name}-000000, models: ['*'], policies: [{name}]}}\n")
    };
    let names = ["trap", "trap-open", "spin", "hoard", "not-json", "stopper"];
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\npolicies:\n{p}keys:\n{k}sources:\n\
         \x20 - {{name: mock, base_url: '{url}', api_key: sk-upstream-secret-0123456789,\n\
         \x20     models: [{{name: fixture}}, {{name: 'say:Go on then STOP here'}}]}}\n",
        p = [
            policy("trap", "trap", ""),
            policy("trap-open", "trap", ", on_error: open"),
            policy("spin", "loop", ", cpu_ms: 20"),
            policy("hoard", "grow", ", memory_mb: 16"),
            policy("not-json", "not-json", ""),
            policy("stopper", "stop-stream", ""),
        ]
        .concat(),
        k = names.iter().map(|n| key(n)).collect::<String>()
            + "  - {name: bystander, key: sk-test-policy-bystander-000000, models: ['*']}\n",
        cache = shared_cache().display(),
        url = mock.url,
    )
}

#[tokio::test]
async fn a_failing_policy_refuses_or_passes_as_its_on_error_says_and_is_bounded() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&hostile_config(&mock)).await;
    let ask = json!({"model": "fixture", "messages": [{"role": "user", "content": "hi"}]});
    let key = |name: &str| format!("sk-test-policy-{name}-000000");

    // A policy spinning on one key's requests holds up no other key's.
    let (spin, bystander) = (key("spin"), key("bystander"));
    let spinning = (0..4).map(|_| chat_as(&gw, &spin, &ask));
    let bystanders = (0..8).map(|_| chat_as(&gw, &bystander, &ask));
    let (spun, served) = tokio::join!(futures::future::join_all(spinning), futures::future::join_all(bystanders));
    assert!(spun.iter().all(|r| r.status() == 503));
    assert!(served.iter().all(|r| r.status() == 200));
    let upstream_before = mock.state.requests().len();
    assert_eq!(upstream_before, 8);

    // A trap, a CPU loop, unbounded memory and a rewrite that is not JSON: each refused 503
    // `policy_failed` (on_error: closed), none reaching the upstream, each in its row.
    for name in ["trap", "spin", "hoard", "not-json"] {
        let response = chat_as(&gw, &key(name), &ask).await;
        assert_eq!(response.status(), 503, "{name}");
        let id = request_id(&response);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "policy_failed", "{name}");
        assert!(error["error"]["message"].as_str().unwrap().contains(&format!("`{name}`")));
        let rows = rows_of(&gw, &id);
        assert_eq!(rows[0].policy.as_deref(), Some(format!("{name}:request:failed_closed").as_str()));
    }
    assert_eq!(mock.state.requests().len(), upstream_before, "none of them went upstream");

    // on_error: open passes the request on, and says so in its row.
    let response = chat_as(&gw, &key("trap-open"), &ask).await;
    assert_eq!(response.status(), 200);
    let rows = rows_of(&gw, &request_id(&response));
    assert_eq!(rows[0].policy.as_deref(), Some("trap-open:request:failed_open"));
    assert_eq!(mock.state.requests().len(), upstream_before + 1);

    // A failed instance is dropped, never reused: the next call gets a fresh one.
    assert_eq!(chat_as(&gw, &key("trap"), &ask).await.status(), 503);
    assert_eq!(chat_as(&gw, &key("trap-open"), &ask).await.status(), 200);

    // A stream a policy ends: the text before passes, then an error event, and no [DONE].
    let streamed =
        json!({"model": "say:Go on then STOP here", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let response = chat_as(&gw, &key("stopper"), &streamed).await;
    let id = request_id(&response);
    let body = response.text().await.unwrap();
    let events: Vec<Value> = body
        .split_terminator("\n\n")
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    let text: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "Go on then", "{body}");
    assert!(!body.contains("data: [DONE]"), "{body}");
    let last = body.split_terminator("\n\n").last().unwrap();
    let error: Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(error["error"]["code"], "stopped_by_policy");
    let rows = rows_of(&gw, &id);
    assert_eq!(rows[0].status, Some(451));
    assert_eq!(rows[0].policy.as_deref(), Some("stopper:stream:deny"));
    assert!(rows[0].tokens_out.is_some(), "what was generated is still counted");
}

async fn admin(gw: &TestGateway, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new().request(method, format!("{}/admin/api{path}", gw.url)).bearer_auth(gw.admin_token())
}

#[tokio::test]
async fn operators_define_upload_and_delete_policies_at_run_time_and_they_survive_a_restart() {
    use reqwest::Method;
    let mock = MockUpstream::start().await;
    let yaml = config(&mock);
    let gw = TestGateway::start(&yaml).await;
    let ask = |content: &str, max_tokens: u64| json!({"model": "fixture", "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]});

    // A built-in defined at run time, global: in use by the next request.
    let defined = admin(&gw, Method::PUT, "/policies/fruit")
        .await
        .json(&json!({"plugin": "deny-list", "settings": {"words": "kumquat"}, "global": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(defined.status(), 200);
    let response = chat_as(&gw, PLAIN_KEY, &ask("a kumquat please", 10)).await;
    assert_eq!(response.status(), 400);
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["code"], "content_denied");
    // Its settings changed: the same component, the new words.
    let changed = admin(&gw, Method::PUT, "/policies/fruit")
        .await
        .json(&json!({"plugin": "deny-list", "settings": {"words": "durian"}, "global": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    assert_eq!(chat_as(&gw, PLAIN_KEY, &ask("a kumquat please", 10)).await.status(), 200);
    assert_eq!(chat_as(&gw, PLAIN_KEY, &ask("a durian please", 10)).await.status(), 400);

    // A component uploaded (the limits policy's bytes), then given settings; attached to a new key.
    let wasm = std::fs::read(crate::support::gateway::guest_wasm("limits")).unwrap();
    let uploaded = admin(&gw, Method::PUT, "/policies/caps2/component").await.body(wasm).send().await.unwrap();
    assert_eq!(uploaded.status(), 201);
    let shown: Value = uploaded.json().await.unwrap();
    assert_eq!((shown["component"].as_str(), shown["global"].as_bool()), (Some("limits"), Some(false)), "{shown}");
    let plugin = shown["plugin"].as_str().unwrap().to_string();
    assert_eq!(plugin, "uploaded:caps2");
    assert!(gw.data_dir().join("policies/caps2.wasm").exists());
    let set = admin(&gw, Method::PUT, "/policies/caps2")
        .await
        .json(&json!({"plugin": plugin, "settings": {"max_tokens": "50"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let key: Value = admin(&gw, Method::POST, "/keys")
        .await
        .json(&json!({"name": "capped", "policies": ["caps2"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let capped = key["key"].as_str().unwrap().to_string();
    assert_eq!(chat_as(&gw, &capped, &ask("hi", 500)).await.status(), 400);
    assert_eq!(chat_as(&gw, &capped, &ask("hi", 20)).await.status(), 200);

    // What is not a policy changes nothing.
    let junk =
        admin(&gw, Method::PUT, "/policies/junk/component").await.body(b"not wasm".to_vec()).send().await.unwrap();
    assert_eq!(junk.status(), 400);
    let adapter = std::fs::read(crate::support::gateway::guest_wasm("openai")).unwrap();
    let wrong = admin(&gw, Method::PUT, "/policies/wrong/component").await.body(adapter).send().await.unwrap();
    assert_eq!(wrong.status(), 400);
    assert!(wrong.text().await.unwrap().contains("policy-world"));
    let listed = gw.admin_json(&gw.admin_token(), "/admin/api/policies").await;
    let names: Vec<&str> = listed["policies"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["caps", "caps2", "fruit", "pii", "secrets", "words"]);

    // config.yaml's cannot be deleted here; one a key names cannot be deleted while it does.
    assert_eq!(admin(&gw, Method::DELETE, "/policies/pii").await.send().await.unwrap().status(), 409);
    let refused = admin(&gw, Method::DELETE, "/policies/caps2").await.send().await.unwrap();
    assert_eq!(refused.status(), 400, "a key names it");

    // A restart: the runtime policies, the uploaded component included, are back.
    let gw = gw.restart(&yaml, std::sync::Arc::new(switchyard::scheduler::SystemClock)).await;
    assert_eq!(chat_as(&gw, &capped, &ask("hi", 500)).await.status(), 400);
    assert_eq!(chat_as(&gw, PLAIN_KEY, &ask("a durian please", 10)).await.status(), 400);
    assert_eq!(admin(&gw, Method::DELETE, "/policies/fruit").await.send().await.unwrap().status(), 204);
    assert_eq!(chat_as(&gw, PLAIN_KEY, &ask("a durian please", 10)).await.status(), 200);
}
