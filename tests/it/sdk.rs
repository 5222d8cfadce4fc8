//! The official SDKs (`openai` and `@anthropic-ai/sdk` for Node, pinned in
//! tests/browser/package-lock.json) against the gateway: Responses text, a stored turn
//! continued, streamed function calls and their results, a cut stream ending in one
//! `response.failed`, an unknown `previous_response_id`; an Anthropic message, a streamed one
//! whose thinking keeps its signature, and count_tokens (tests/browser/sdk/official.mjs); and
//! the response cache's hits read by each SDK as live answers are (tests/browser/sdk/cached.mjs).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{KEY, MockUpstream, TestGateway, config_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_read_every_answer_the_gateway_gives() {
    let mock = MockUpstream::start().await;
    let sources = format!(
        "sources:\n  - {{name: oai, base_url: '{url}', stream_whole_answers: false, models: [{{name: gpt, upstream: fixture}}, {{name: gpt-tools, upstream: tools}}]}}\n\
         \x20 - {{name: claude, base_url: '{url}', adapter: anthropic, models: [{{name: claude, upstream: claude-text}}, {{name: claude-code}}, {{name: claude-cut}}]}}\n",
        url = mock.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    let out = run_sdk_script(&gw.url, "official.mjs").await;

    assert_eq!(out["text"]["output_text"], "\n\nHello there, how may I assist you today?");
    assert_eq!(
        (out["text"]["usage"]["input_tokens"].as_u64(), out["text"]["usage"]["output_tokens"].as_u64()),
        (Some(9), Some(12))
    );
    assert_eq!(out["continued"]["status"], "completed");
    assert!(out["continued"]["previous_response_id"].as_str().unwrap().starts_with("resp_"), "{out}");

    let calls = &out["calls"];
    assert_eq!(
        calls["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["name"].clone(), c["arguments"].clone()))
            .collect::<Vec<_>>(),
        [
            (json!("get_weather"), json!({"location": "Paris"})),
            (json!("get_time"), json!({"timezone": "Europe/Paris"}))
        ]
    );
    assert_eq!(calls["terminal"], json!(["response.completed"]));
    let sequence: Vec<u64> = calls["sequence"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    assert!(sequence.iter().enumerate().all(|(i, n)| *n == i as u64), "{sequence:?}");
    assert_eq!(out["results"]["status"], "completed");
    let sent = mock
        .state
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool")));
    assert!(sent.is_some(), "the function results reached the upstream as tool messages");

    assert_eq!(out["cut"]["terminal"], json!(["response.failed"]), "{}", out["cut"]);
    assert_eq!(out["cut"]["text"], "Hello!");
    assert_eq!(out["cut"]["error"]["code"], "server_error", "a code the Responses API defines");
    assert!(out["cut"]["error"]["message"].as_str().unwrap().starts_with("stream_truncated: "), "{}", out["cut"]);
    assert_eq!(out["unknown"], json!({"status": 404, "code": "previous_response_not_found"}));

    assert_eq!(out["message"]["text"], "Hi! My name is Claude.");
    assert_eq!(out["message"]["usage"]["cache_read_input_tokens"], 1800);
    let thinking = &out["thinking"];
    let blocks = thinking["blocks"].as_array().unwrap();
    assert_eq!(
        blocks.iter().map(|b| b["type"].as_str().unwrap()).collect::<Vec<_>>(),
        ["thinking", "redacted_thinking", "tool_use"],
        "{thinking}"
    );
    assert_eq!(
        blocks[0]["signature"], "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
        "the signature the next turn needs"
    );
    assert_eq!(blocks[1]["data"], "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP");
    assert_eq!(blocks[2]["input"], json!({"command": "cargo test -- --nocapture"}));
    assert_eq!(
        (thinking["usage"]["cache_read_input_tokens"].as_u64(), thinking["usage"]["output_tokens"].as_u64()),
        (Some(48210), Some(89))
    );
    assert_eq!(thinking["stop_reason"], "tool_use");
    assert_eq!(out["counted"], json!({"input_tokens": 2095}));
}

/// Runs `script` (under tests/browser/sdk) against the gateway at `url`; what it printed.
async fn run_sdk_script(url: &str, script: &str) -> Value {
    let browser = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    assert!(browser.join("node_modules/openai").is_dir(), "run `npm ci --prefix tests/browser`, as .ci/run does");
    let run = tokio::process::Command::new("node")
        .arg(browser.join("sdk").join(script))
        .env("GATEWAY", url)
        .env("KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (install nodejs)");
    let output = tokio::time::timeout(Duration::from_secs(60), run.wait_with_output())
        .await
        .expect("the SDK script ends in time")
        .expect("node's output");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the SDK script failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_read_cache_hits_as_they_read_live_answers() {
    let mock = MockUpstream::start().await;
    let sources = format!(
        "sources:\n  - {{name: oai, base_url: '{url}', stream_whole_answers: false, cache: true, models: [{{name: gpt, upstream: fixture}}]}}\n\
         \x20 - {{name: claude, base_url: '{url}', adapter: anthropic, cache: true, models: [{{name: claude-code}}]}}\n",
        url = mock.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    let out = run_sdk_script(&gw.url, "cached.mjs").await;

    let chat = &out["chat"];
    assert_eq!((chat["live"]["cache"].as_str(), chat["hit"]["cache"].as_str()), (Some("miss"), Some("hit")), "{chat}");
    assert_eq!(chat["hit"]["message"], chat["live"]["message"]);
    assert_eq!(chat["hit"]["usage"], chat["live"]["usage"]);
    assert_eq!(chat["stream"]["cache"], "hit");
    assert_eq!(chat["stream"]["text"], chat["live"]["message"]["content"]);
    assert_eq!(chat["stream"]["usage"], chat["live"]["usage"]);
    assert_eq!(chat["stream"]["finish"], "stop");

    let anthropic = &out["anthropic"];
    assert_eq!(
        (anthropic["live"]["cache"].as_str(), anthropic["whole_live"]["cache"].as_str()),
        (Some("miss"), Some("miss")),
        "{anthropic}"
    );
    // Thinking keeps its text and signature, redacted thinking and tool calls come back too: a
    // native answer is replayed as the upstream sent it, the next turn can be sent back.
    for (hit, live) in [("stream", "live"), ("whole", "whole_live")] {
        assert_eq!(anthropic[hit]["cache"], "hit", "{anthropic}");
        assert_eq!(anthropic[hit]["blocks"], anthropic[live]["blocks"], "{hit}: {anthropic}");
        assert_eq!(anthropic[hit]["stop"], anthropic[live]["stop"]);
    }
    let usage = |u: &Value| (u["input_tokens"].as_u64(), u["output_tokens"].as_u64());
    assert_eq!(usage(&anthropic["stream"]["usage"]), usage(&anthropic["live"]["usage"]));
    let types: Vec<&str> =
        anthropic["live"]["blocks"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["thinking", "redacted_thinking", "tool_use"]);

    let responses = &out["responses"];
    assert_eq!(responses["live"]["cache"], "miss", "{responses}");
    assert_eq!((responses["hit"]["cache"].as_str(), responses["stream"]["cache"].as_str()), (Some("hit"), Some("hit")));
    assert_eq!(responses["hit"]["text"], responses["live"]["text"]);
    assert_eq!(responses["stream"]["text"], responses["live"]["text"]);
    assert_eq!(
        (responses["hit"]["status"].as_str(), responses["stream"]["status"].as_str()),
        (Some("completed"), Some("completed"))
    );
    assert_ne!(responses["hit"]["id"], responses["hit"]["live_id"], "a hit is a new stored turn of its own");
    assert_eq!(mock.state.requests().len(), 4, "one upstream call per protocol (two for Anthropic's modes)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_see_policies_redact_and_refuse_through_the_real_binary() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let rest = format!(
        "policies:\n\
         \x20 - {{name: pii, plugin: redact-pii, global: true}}\n\
         \x20 - {{name: secrets, plugin: block-secrets, global: true}}\n\
         sources:\n\
         \x20 - {{name: oai, base_url: '{url}', stream_whole_answers: false,\n\
         \x20     models: [{{name: fixture}}, {{name: 'say3:Mail alice.smith@example.com now'}}]}}\n",
        url = mock.url
    );
    let gateway = crate::support::binary::Binary::start(dir.path(), &rest);
    let out = run_sdk_script(&gateway.url, "policed.mjs").await;

    let requests = mock.state.requests();
    let first = requests[0].body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(first, "Card [CARD], mail [EMAIL]", "what the upstream got");
    assert_eq!(out["whole"]["finish"], "stop", "{out}");

    let stream = &out["stream"];
    assert_eq!(stream["text"], "Mail [EMAIL] now", "{stream}");
    assert!(stream["pieces"].as_array().unwrap().iter().all(|p| !p.as_str().unwrap().contains("alice")));
    assert_eq!(stream["finish"], "stop");
    assert_eq!(stream["usage"]["prompt_tokens"], 10, "usage counted and passed on: {stream}");

    for sdk in ["openai", "anthropic"] {
        let refused = &out[sdk];
        assert_eq!(
            (refused["refused"].as_bool(), refused["status"].as_u64()),
            (Some(true), Some(400)),
            "{sdk}: {refused}"
        );
        assert!(refused["message"].as_str().unwrap().contains("AWS"), "{sdk}: {refused}");
    }
    assert_eq!(out["openai"]["code"], "secret_detected");
    assert_eq!(out["anthropic"]["type"], "invalid_request_error");
    assert_eq!(mock.state.requests().len(), 2, "the refused requests never went upstream");
}
