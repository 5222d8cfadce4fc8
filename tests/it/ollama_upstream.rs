//! OpenAI clients reaching Ollama's native `/api/chat` through the built-in `ollama`
//! component: NDJSON streams, whole tool calls indexed in order, usage, errors, truncation.

use serde_json::{Value, json};

use crate::support::{MockUpstream, TestGateway, assemble, config_with, openai_events};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    let root = mock.url.trim_end_matches("/v1");
    // Whole answers asked as sent: these tests read each adapter's JSON path (the default,
    // a whole answer put together from a stream, is tests/it/whole_answers.rs).
    let sources = format!(
        "sources:\n  - name: local\n    base_url: {root}\n    stream_whole_answers: false\n    adapter: ollama\n    models: [{{name: llama-text}}, {{name: llama-tools}}, {{name: llama-cut}}, {{name: llama-missing}}, {{name: llama-think}}]\n"
    );
    TestGateway::start(&config_with(&sources)).await
}

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "stream_options": {"include_usage": true}, "max_tokens": 64, "temperature": 0.1,
           "messages": [{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]})
}

#[tokio::test]
async fn requests_become_native_chat_requests() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    assert_eq!(gw.chat(ask("llama-text", false)).await.status(), 200);
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(
        seen,
        json!({
            "model": "llama-text",
            "stream": false,
            "options": {"temperature": 0.1, "num_predict": 64},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is this?", "images": ["iVBORw0KGgo="]},
            ],
        })
    );
}

#[tokio::test]
async fn a_reply_becomes_a_chat_completion_with_usage() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let body: Value = gw.chat(ask("llama-text", false)).await.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "Hello! How are you today?");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"], json!({"prompt_tokens": 26, "completion_tokens": 298, "total_tokens": 324}));
}

#[tokio::test]
async fn ndjson_streams_become_sse_chunks() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let (chunks, done) = openai_events(&gw.chat(ask("llama-text", true)).await.text().await.unwrap());
    assert!(done);
    let all = assemble(&chunks);
    assert_eq!(all.content, "The sky is blue.");
    assert_eq!(all.finish.as_deref(), Some("stop"));
    assert_eq!(all.usage.unwrap()["total_tokens"], 308);

    let (chunks, done) = openai_events(&gw.chat(ask("llama-tools", true)).await.text().await.unwrap());
    assert!(done);
    let all = assemble(&chunks);
    assert_eq!(all.tool_calls.len(), 2);
    assert_eq!(
        (all.tool_calls[0].1.as_str(), all.tool_calls[0].2.as_str()),
        ("get_weather", r#"{"location":"Paris"}"#)
    );
    assert_eq!(
        (all.tool_calls[1].1.as_str(), all.tool_calls[1].2.as_str()),
        ("get_time", r#"{"timezone":"Europe/Paris"}"#)
    );
    assert_ne!(all.tool_calls[0].0, all.tool_calls[1].0, "each call gets its own id");
    assert_eq!(all.finish.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn errors_and_cut_streams_are_reported() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let response = gw.chat(ask("llama-missing", false)).await;
    assert_eq!(response.status(), 404);
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["message"], "model 'llama-missing' not found");

    let (chunks, done) = openai_events(&gw.chat(ask("llama-cut", true)).await.text().await.unwrap());
    assert!(!done);
    assert_eq!(chunks.last().unwrap()["error"]["code"], "stream_truncated");
    assert_eq!(assemble(&chunks[..chunks.len() - 1]).content, "The sky");
}

#[tokio::test]
async fn thinking_streams_as_reasoning_content_and_the_switch_reaches_ollama() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let mut request = ask("llama-think", true);
    request["reasoning_effort"] = json!("medium");
    let (chunks, done) = openai_events(&gw.chat(request.clone()).await.text().await.unwrap());
    assert!(done);
    let all = assemble(&chunks);
    assert_eq!(all.reasoning, "The user asks for 2+2. That is 4.");
    assert_eq!(all.content, "4");
    assert_eq!(mock.state.requests().pop().unwrap().body["think"], true);
    request["disable_thinking"] = json!(true);
    gw.chat(request).await.text().await.unwrap();
    assert_eq!(mock.state.requests().pop().unwrap().body["think"], false);
}
