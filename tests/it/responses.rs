//! `POST /v1/responses` through a real client library (async-openai's Responses types parse
//! every answer and event) against OpenAI-chat, Anthropic, Gemini and Ollama upstreams: text,
//! streamed function calls, a Codex-shaped request, a cut stream ending in exactly one
//! `response.failed`, and `previous_response_id` refused as not kept.

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::responses::{CreateResponse, ResponseStreamEvent};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::{KEY, MockUpstream, TestGateway, config_with};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    let sources = format!(
        "sources:\n  - {{name: oai, base_url: '{url}', models: [{{name: gpt, upstream: fixture}}, {{name: gpt-tools, upstream: tools}}]}}\n\
         \x20 - {{name: claude, base_url: '{url}', adapter: anthropic, models: [{{name: claude-tools, upstream: claude-tools}}, {{name: claude-cut}}]}}\n\
         \x20 - {{name: local, base_url: '{root}', adapter: ollama, models: [{{name: llama-tools}}]}}\n\
         \x20 - {{name: google, base_url: '{root}/v1beta', adapter: gemini, models: [{{name: gemini-tools}}]}}\n",
        url = mock.url,
        root = mock.url.trim_end_matches("/v1")
    );
    TestGateway::start(&config_with(&sources)).await
}

fn client(gw: &TestGateway) -> Client<OpenAIConfig> {
    Client::with_config(OpenAIConfig::new().with_api_base(format!("{}/v1", gw.url)).with_api_key(KEY))
}

fn request(model: &str) -> CreateResponse {
    serde_json::from_value(json!({
        "model": model,
        "instructions": "You are terse.",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather and time in Paris?"}]}],
        "tools": [
            {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}, "strict": false},
            {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}, "strict": false},
        ],
    }))
    .unwrap()
}

/// A stream's text, (function name, parsed arguments) in order, and its terminal event types.
async fn streamed(gw: &TestGateway, model: &str) -> (String, Vec<(String, Value)>, Vec<String>) {
    let mut stream = client(gw).responses().create_stream(request(model)).await.unwrap();
    let (mut text, mut calls, mut terminal, mut sequence) = (String::new(), Vec::new(), Vec::new(), Vec::new());
    while let Some(event) = stream.next().await {
        let event = event.unwrap_or_else(|e| panic!("{model}: an event the SDK cannot read: {e}"));
        sequence.push(serde_json::to_value(&event).unwrap()["sequence_number"].as_u64().unwrap());
        match event {
            ResponseStreamEvent::ResponseOutputTextDelta(delta) => text.push_str(&delta.delta),
            ResponseStreamEvent::ResponseOutputItemDone(done) => {
                let item = serde_json::to_value(&done.item).unwrap();
                if item["type"] == "function_call" {
                    let arguments = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
                    calls.push((item["name"].as_str().unwrap().to_string(), arguments));
                }
            }
            ResponseStreamEvent::ResponseCompleted(_) => terminal.push("completed".to_string()),
            ResponseStreamEvent::ResponseIncomplete(_) => terminal.push("incomplete".to_string()),
            ResponseStreamEvent::ResponseFailed(_) => terminal.push("failed".to_string()),
            _ => {}
        }
    }
    assert!(sequence.windows(2).all(|w| w[1] == w[0] + 1) && sequence.first() == Some(&0), "{model}: {sequence:?}");
    (text, calls, terminal)
}

#[tokio::test]
async fn the_responses_sdk_gets_text_and_function_calls_from_every_upstream_protocol() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;

    let plain: CreateResponse =
        serde_json::from_value(json!({"model": "gpt", "input": "Hello", "max_output_tokens": 100})).unwrap();
    let response = client(&gw).responses().create(plain).await.unwrap();
    assert_eq!(response.output_text().as_deref(), Some("\n\nHello there, how may I assist you today?"));
    let usage = response.usage.expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.total_tokens), (9, 12, 21));
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(
        (seen["messages"].clone(), seen["max_tokens"].clone()),
        (json!([{"role": "user", "content": "Hello"}]), json!(100))
    );

    let paris = vec![
        ("get_weather".to_string(), json!({"location": "Paris"})),
        ("get_time".to_string(), json!({"timezone": "Europe/Paris"})),
    ];
    for model in ["gpt-tools", "llama-tools", "gemini-tools"] {
        let (text, calls, terminal) = streamed(&gw, model).await;
        assert_eq!(
            (text.as_str(), &calls, terminal.as_slice()),
            ("", &paris, ["completed".to_string()].as_slice()),
            "{model}"
        );
    }
    let (text, calls, terminal) = streamed(&gw, "claude-tools").await;
    assert_eq!(text, "Okay, let's check the weather.");
    assert_eq!(calls[0], ("get_weather".to_string(), json!({"location": "San Francisco, CA", "unit": "fahrenheit"})));
    assert_eq!((calls.len(), terminal), (2, vec!["completed".to_string()]));
    let seen =
        mock.state.requests().into_iter().find(|r| r.body.get("system").is_some()).expect("the Anthropic request").body;
    assert_eq!(seen["system"], "You are terse.", "instructions became the system prompt upstream");
}

#[tokio::test]
async fn a_codex_shaped_request_is_served_and_what_cannot_be_translated_is_dropped_or_refused() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let codex = json!({
        "model": "gpt-tools", "instructions": "You are Codex, a coding agent.", "stream": true, "store": false,
        "reasoning": {"effort": "medium", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0195-session", "parallel_tool_calls": false, "tool_choice": "auto",
        "tools": [
            {"type": "function", "name": "shell", "description": "Runs a shell command", "strict": false,
             "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}, "required": ["command"]}},
            {"type": "web_search"},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
        ],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>read-only</permissions>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>cwd=/repo</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is in this repo?"}]},
        ],
    });
    let response = reqwest::Client::new()
        .post(format!("{}/v1/responses", gw.url))
        .bearer_auth(KEY)
        .json(&codex)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    let kinds: Vec<&str> = body.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with("response.completed") || k.ends_with("failed") || k.ends_with("incomplete"))
            .count(),
        1
    );
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(seen["messages"][0], json!({"role": "system", "content": "You are Codex, a coding agent."}));
    assert_eq!(seen["messages"][1], json!({"role": "system", "content": "<permissions>read-only</permissions>"}));
    assert_eq!(seen["tools"].as_array().unwrap().len(), 1, "built-in and custom tools left out: {}", seen["tools"]);
    assert_eq!(
        (seen["reasoning_effort"].as_str(), seen["prompt_cache_key"].as_str()),
        (Some("medium"), Some("0195-session"))
    );

    let refused = reqwest::Client::new()
        .post(format!("{}/v1/responses", gw.url))
        .bearer_auth(KEY)
        .json(&json!({"model": "gpt", "input": "again", "previous_response_id": "resp_123"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"]["code"], "previous_response_not_found");
    let unknown = reqwest::Client::new()
        .post(format!("{}/v1/responses", gw.url))
        .bearer_auth(KEY)
        .json(&json!({"model": "nosuch", "input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}

#[tokio::test]
async fn a_cut_upstream_stream_ends_in_exactly_one_response_failed() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let mut stream = client(&gw).responses().create_stream(request("claude-cut")).await.unwrap();
    let (mut text, mut terminal) = (String::new(), Vec::new());
    while let Some(event) = stream.next().await {
        match event.expect("every event parses") {
            ResponseStreamEvent::ResponseOutputTextDelta(delta) => text.push_str(&delta.delta),
            ResponseStreamEvent::ResponseFailed(failed) => {
                let error = failed.response.error.expect("the failure says why");
                terminal.push(("failed", serde_json::to_value(&error).unwrap()));
            }
            ResponseStreamEvent::ResponseCompleted(_) => terminal.push(("completed", Value::Null)),
            ResponseStreamEvent::ResponseIncomplete(_) => terminal.push(("incomplete", Value::Null)),
            _ => {}
        }
    }
    assert_eq!(text, "Hello!", "what arrived before the cut was delivered");
    assert_eq!(terminal.len(), 1, "{terminal:?}");
    assert_eq!(terminal[0].0, "failed");
    assert_eq!(terminal[0].1["code"], "stream_truncated", "{:?}", terminal[0].1);
}
