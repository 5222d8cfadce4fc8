//! OpenAI clients reaching an Anthropic upstream through the built-in `anthropic` component:
//! request translation, text, parallel streamed tool calls, thinking, usage with cache
//! tokens, errors, and streams that break.

use serde_json::{Value, json};

use crate::support::{MockUpstream, TestGateway, assemble, config_with, openai_events};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    // Whole answers asked as sent: these tests read each adapter's JSON path (the default,
    // a whole answer put together from a stream, is tests/it/whole_answers.rs).
    let sources = format!(
        "sources:\n  - name: claude\n    base_url: {}\n    stream_whole_answers: false\n    api_key: sk-ant-upstream-0123456789\n    adapter: anthropic\n    models:\n      - name: text\n        upstream: claude-text\n      - name: tools\n        upstream: claude-tools\n      - name: thinking\n        upstream: claude-thinking\n      - name: overloaded\n        upstream: claude-overloaded\n      - name: cut\n        upstream: claude-cut\n      - name: midstream\n        upstream: claude-midstream-error\n",
        mock.url
    );
    TestGateway::start(&config_with(&sources)).await
}

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "Hello"}]})
}

#[tokio::test]
async fn requests_translate_to_the_messages_api() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let request = json!({
        "model": "text",
        "max_tokens": 300,
        "temperature": 0.5,
        "stop": "END",
        "tool_choice": "required",
        "parallel_tool_calls": false,
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "What is here?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
        ],
    });
    assert_eq!(gw.chat(request).await.status(), 200);
    let seen = mock.state.requests().pop().unwrap();
    assert_eq!(seen.headers["x-api-key"], "sk-ant-upstream-0123456789");
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert!(seen.headers.get("authorization").is_none());
    assert_eq!(
        seen.body,
        json!({
            "model": "claude-text",
            "system": "Be brief.",
            "max_tokens": 300,
            "temperature": 0.5,
            "stop_sequences": ["END"],
            "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is here?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Rome"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "rain"}]},
            ],
        })
    );
}

#[tokio::test]
async fn reasoning_effort_becomes_a_thinking_budget_and_disable_thinking_wins() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let mut request = ask("text", false);
    request["reasoning_effort"] = json!("low");
    request["temperature"] = json!(0.3);
    gw.chat(request.clone()).await;
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(seen["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    assert!(seen["max_tokens"].as_u64().unwrap() > 2048);
    assert!(seen.get("temperature").is_none(), "Anthropic refuses sampling knobs while thinking");
    request["disable_thinking"] = json!(true);
    gw.chat(request).await;
    let seen = mock.state.requests().pop().unwrap().body;
    assert!(seen.get("thinking").is_none());
    assert_eq!(seen["temperature"], 0.3);
}

#[tokio::test]
async fn a_message_becomes_a_chat_completion_with_cache_tokens() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let body: Value = gw.chat(ask("text", false)).await.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["id"], "msg_013Zva2CMHLNnXjNJJKqJ2EF");
    assert_eq!(body["choices"][0]["message"], json!({"role": "assistant", "content": "Hi! My name is Claude."}));
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 3995, "completion_tokens": 503, "total_tokens": 4498,
               "prompt_tokens_details": {"cached_tokens": 1800, "cache_creation_tokens": 100}})
    );
}

#[tokio::test]
async fn streamed_text_arrives_as_chunks_with_usage() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let (chunks, done) = openai_events(&gw.chat(ask("text", true)).await.text().await.unwrap());
    assert!(done);
    assert_eq!(chunks[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk" && c["id"] == "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY")
    );
    let all = assemble(&chunks);
    assert_eq!(all.content, "Hello!");
    assert_eq!(all.finish.as_deref(), Some("stop"));
    assert_eq!(all.usage.unwrap(), json!({"prompt_tokens": 25, "completion_tokens": 15, "total_tokens": 40}));
}

#[tokio::test]
async fn parallel_streamed_tool_calls_keep_their_own_indexes() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let (chunks, done) = openai_events(&gw.chat(ask("tools", true)).await.text().await.unwrap());
    assert!(done);
    let all = assemble(&chunks);
    assert_eq!(all.content, "Okay, let's check the weather.");
    assert_eq!(
        all.tool_calls,
        [
            (
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6".to_string(),
                "get_weather".to_string(),
                r#"{"location": "San Francisco, CA", "unit": "fahrenheit"}"#.to_string()
            ),
            (
                "toolu_01VhyJR3Fmh7ovyHYCC4QzeZ".to_string(),
                "get_time".to_string(),
                r#"{"timezone": "America/Los_Angeles"}"#.to_string()
            ),
        ]
    );
    // Anthropic's block indexes (1, 2) are not OpenAI's tool-call indexes (0, 1).
    let indexes: Vec<u64> = chunks
        .iter()
        .flat_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|t| t["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes.first(), Some(&0));
    assert_eq!(indexes.last(), Some(&1));
    assert_eq!(all.finish.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn thinking_deltas_surface_as_reasoning_content_and_unreported_usage_stays_null() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let (chunks, done) = openai_events(&gw.chat(ask("thinking", true)).await.text().await.unwrap());
    assert!(done);
    let all = assemble(&chunks);
    assert_eq!(all.reasoning, "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3");
    assert_eq!(all.content, "27 * 453 = 12,231");
    assert_eq!(all.usage.unwrap(), json!({"prompt_tokens": null, "completion_tokens": null, "total_tokens": null}));

    // The thinking's signature comes along, opaque, and goes back with the thinking next turn.
    let signature: String =
        chunks.iter().filter_map(|c| c["choices"][0]["delta"]["reasoning_signature"].as_str()).collect();
    assert_eq!(signature, "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds...");
    let mut next = ask("thinking", false);
    next["messages"] = json!([
        {"role": "user", "content": "What is 27 * 453?"},
        {"role": "assistant", "content": all.content, "reasoning_content": all.reasoning, "reasoning_signature": signature,
         "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "check", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "correct"},
        {"role": "assistant", "content": "unsigned", "reasoning_content": "another provider's thoughts"},
        {"role": "user", "content": "Thanks"},
    ]);
    assert_eq!(gw.chat(next).await.status(), 200);
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(
        seen["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": all.reasoning, "signature": signature}),
        "signed thinking first in its turn: {seen}"
    );
    assert!(
        seen["messages"][3]["content"].as_array().unwrap().iter().all(|b| b["type"] != "thinking"),
        "unsigned reasoning is not sent to Anthropic: {seen}"
    );
}

#[tokio::test]
async fn upstream_errors_and_broken_streams_are_reported_not_hidden() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;

    let response = gw.chat(ask("overloaded", false)).await;
    assert_eq!(response.status(), 529);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "overloaded_error");
    assert_eq!(body["error"]["message"], "Overloaded");

    let (chunks, done) = openai_events(&gw.chat(ask("cut", true)).await.text().await.unwrap());
    assert!(!done);
    assert_eq!(chunks.last().unwrap()["error"]["code"], "stream_truncated");
    assert_eq!(assemble(&chunks[..chunks.len() - 1]).content, "Hello!");

    let (chunks, done) = openai_events(&gw.chat(ask("midstream", true)).await.text().await.unwrap());
    assert!(!done);
    let error = &chunks.last().unwrap()["error"];
    assert_eq!(error["type"], "overloaded_error");
    assert_eq!(error["message"], "Overloaded");
}
