//! OpenAI clients reaching Gemini through the built-in `gemini` component: request shape,
//! CRLF-framed SSE, thoughts, function calls indexed in order, usage with cached and thinking
//! tokens, quota errors, truncation.

use serde_json::{Value, json};

use crate::support::{MockUpstream, TestGateway, assemble, config_with, openai_events};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    let root = mock.url.trim_end_matches("/v1");
    // Whole answers asked as sent: these tests read each adapter's JSON path (the default,
    // a whole answer put together from a stream, is tests/it/whole_answers.rs).
    let sources = format!(
        "sources:\n  - name: google\n    base_url: {root}/v1beta\n    stream_whole_answers: false\n    api_key: AIza-upstream-0123456789\n    adapter: gemini\n    models: [{{name: gemini-text}}, {{name: gemini-tools}}, {{name: gemini-quota}}, {{name: gemini-cut}}]\n"
    );
    TestGateway::start(&config_with(&sources)).await
}

#[tokio::test]
async fn requests_become_generate_content_requests() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let request = json!({
        "model": "gemini-text", "max_tokens": 100, "temperature": 0.2, "stop": ["END"], "reasoning_effort": "low",
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        "tool_choice": "required",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Look"}, {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "{\"temp\":18}"},
        ],
    });
    assert_eq!(gw.chat(request).await.status(), 200);
    let seen = mock.state.requests().pop().unwrap();
    assert_eq!(seen.headers["x-goog-api-key"], "AIza-upstream-0123456789");
    assert_eq!(seen.body["call"], "gemini-text:generateContent");
    assert_eq!(
        seen.body["body"],
        json!({
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Look"}, {"inline_data": {"mime_type": "image/jpeg", "data": "/9j/4AAQ"}}]},
                {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"location": "Paris"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 18}}}]},
            ],
            "generationConfig": {"temperature": 0.2, "maxOutputTokens": 100, "stopSequences": ["END"], "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": true}},
            "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": {"type": "object"}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        })
    );
}

#[tokio::test]
async fn a_reply_becomes_a_chat_completion_with_cached_tokens() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let body: Value = gw
        .chat(json!({"model": "gemini-text", "messages": [{"role": "user", "content": "Hi"}]}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["id"], "Wm4XaNvKEJ2u_uMPm9zW6Ak");
    assert_eq!(body["model"], "gemini-2.5-flash");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello! How can I help you today?");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 8, "completion_tokens": 9, "total_tokens": 17, "prompt_tokens_details": {"cached_tokens": 4}})
    );
}

#[tokio::test]
async fn streams_carry_text_thoughts_calls_and_usage() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let ask = |model: &str| json!({"model": model, "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "Hi"}]});

    let (chunks, done) = openai_events(&gw.chat(ask("gemini-text")).await.text().await.unwrap());
    assert!(done);
    assert_eq!(mock.state.requests().pop().unwrap().body["query"], "alt=sse");
    let all = assemble(&chunks);
    assert_eq!(all.content, "The sky is blue.");
    assert_eq!(all.finish.as_deref(), Some("stop"));
    assert_eq!(all.usage.unwrap()["total_tokens"], 13);

    let (chunks, done) = openai_events(&gw.chat(ask("gemini-tools")).await.text().await.unwrap());
    assert!(done);
    let all = assemble(&chunks);
    assert_eq!(all.reasoning, "The user wants the weather and the time.");
    let calls: Vec<(&str, &str)> = all.tool_calls.iter().map(|(_, n, a)| (n.as_str(), a.as_str())).collect();
    assert_eq!(calls, [("get_weather", r#"{"location":"Paris"}"#), ("get_time", r#"{"timezone":"Europe/Paris"}"#)]);
    assert_eq!(all.finish.as_deref(), Some("tool_calls"));
    let usage = all.usage.unwrap();
    assert_eq!(
        (usage["completion_tokens"].as_u64(), usage["completion_tokens_details"]["reasoning_tokens"].as_u64()),
        (Some(30), Some(18))
    );
}

#[tokio::test]
async fn quota_errors_and_cut_streams_are_reported() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let response = gw.chat(json!({"model": "gemini-quota", "messages": [{"role": "user", "content": "Hi"}]})).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["type"], "insufficient_quota");

    let (chunks, done) = openai_events(
        &gw.chat(json!({"model": "gemini-cut", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}))
            .await
            .text()
            .await
            .unwrap(),
    );
    assert!(!done);
    assert_eq!(chunks.last().unwrap()["error"]["code"], "stream_truncated");
}
