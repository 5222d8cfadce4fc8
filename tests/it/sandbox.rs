//! Hostile guests (built from plugins/hostile with the rest): endless loop, memory growth,
//! trap, huge output, snooping. Each fails its attempt with an adapter error naming adapter,
//! call and cause, in bounded time; the gateway keeps serving.

use std::time::Duration;

use serde_json::Value;

use crate::support::mock::CHAT_JSON;
use crate::support::{MockUpstream, TestGateway, chat_body, config_with, guest_wasm};

async fn hostile_gateway(mock: &MockUpstream) -> TestGateway {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("adapters")).unwrap();
    std::fs::copy(guest_wasm("hostile"), dir.path().join("adapters/hostile.wasm")).unwrap();
    let yaml = config_with(&format!(
        "body_limit_mb: 1\nsandbox: {{memory_mb: 40, cpu_ms_per_call: 300, max_output_mb: 4}}\n\
         sources:\n\
         \x20 - name: evil\n    base_url: {url}\n    adapter: hostile\n    max_concurrent: 2\n    models: [{{name: loop}}, {{name: grow}}, {{name: trap}}, {{name: huge}}, {{name: snoop}}, {{name: ok}}]\n\
         \x20 - name: good\n    base_url: {url}\n    stream_whole_answers: false\n    models: [{{name: fixture}}]\n",
        url = mock.url
    ));
    TestGateway::start_in(dir, &yaml).await
}

async fn adapter_error(gw: &TestGateway, model: &str) -> String {
    let response = tokio::time::timeout(Duration::from_secs(30), gw.chat(chat_body(model, false)))
        .await
        .expect("the sandbox bounds the call");
    assert_eq!(response.status(), 502, "{model}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "adapter_error", "{body}");
    body["error"]["message"].as_str().unwrap().to_string()
}

async fn still_serving(gw: &TestGateway) {
    let response = gw.chat(chat_body("fixture", false)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), CHAT_JSON);
    let response = gw.chat(chat_body("ok", false)).await;
    assert_eq!(response.status(), 200, "the hostile adapter's pool replaced the broken instance");
}

#[tokio::test]
async fn every_kind_of_misbehaviour_is_contained_and_named() {
    let mock = MockUpstream::start().await;
    let gw = hostile_gateway(&mock).await;
    let cases = [
        ("loop", "exceeded its CPU bound of 300 ms per call"),
        ("grow", "exceeded its memory cap of 40 MiB"),
        ("trap", "trapped:"),
        ("huge", "over the 4194304-byte output cap"),
    ];
    for (model, cause) in cases {
        let message = adapter_error(&gw, model).await;
        assert!(message.starts_with("adapter `hostile` failed in transform-request: "), "{message}");
        assert!(message.contains(cause), "{model}: {message}");
        still_serving(&gw).await;
    }
    assert!(mock.state.requests().iter().all(|r| r.body["model"] != "loop"), "a failed attempt sends nothing upstream");
}

#[tokio::test]
async fn guests_see_no_environment_files_or_network() {
    let mock = MockUpstream::start().await;
    let gw = hostile_gateway(&mock).await;
    assert!(std::env::vars().count() > 0, "the host process has an environment to leak");
    assert_eq!(gw.chat(chat_body("snoop", false)).await.status(), 200);
    let seen = mock.state.requests().pop().unwrap();
    assert_eq!(
        seen.body,
        serde_json::json!({"env": 0, "args": 0, "read_file": false, "list_root": false, "connect": false})
    );
}

#[tokio::test]
async fn a_broken_override_warns_by_file_and_the_built_in_keeps_serving() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let adapters = dir.path().join("adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    std::fs::write(adapters.join("openai.wasm"), b"\0asm but not really").unwrap();
    let gw = TestGateway::start_in(dir, &config_with(&crate::support::mock_source(&mock, &["fixture"]))).await;
    assert_eq!(gw.report.warnings.len(), 1);
    let warning = &gw.report.warnings[0];
    assert_eq!(warning.file, adapters.join("openai.wasm"));
    assert!(warning.message.contains("not a valid WebAssembly component"), "{}", warning.message);
    assert!(warning.message.contains("keeping the built-in `openai`"), "{}", warning.message);
    assert_eq!(gw.chat(chat_body("fixture", false)).await.status(), 200);
}

#[tokio::test]
async fn a_valid_override_replaces_the_built_in() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let adapters = dir.path().join("adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    // The hostile component, installed under the built-in's name, must now serve `openai` sources.
    std::fs::copy(guest_wasm("hostile"), adapters.join("openai.wasm")).unwrap();
    let gw = TestGateway::start_in(dir, &config_with(&crate::support::mock_source(&mock, &["fixture", "loop"]))).await;
    assert!(gw.report.warnings.is_empty());
    let adapter = gw.gateway.plugins.adapter(&switchyard::config::AdapterName::new("openai")).unwrap();
    assert_eq!(adapter.metadata().name, "hostile");
    assert_eq!(
        adapter_error(&gw, "loop").await.split(':').next().unwrap(),
        "adapter `openai` failed in transform-request"
    );
}
