//! Whole answers put together from upstream streams (`stream_whole_answers`, the default): for
//! every built-in adapter a client asking for a whole answer gets what the stream said, usage
//! included, in its door's shape; silence is cut at the stream timeouts; a cut stream fails over.

use serde_json::{Value, json};

use crate::support::{KEY, MockUpstream, TestGateway, assemble, config_with, openai_events};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    let root = mock.url.trim_end_matches("/v1");
    let sources = format!(
        "channel_selection: order\nsources:\n  - {{name: oai, base_url: '{url}', models: [{{name: gpt, upstream: fixture}}, {{name: gpt-tools, upstream: tools}}, {{name: cutting, upstream: cut}}, {{name: html, upstream: not-json}}, {{name: ds, upstream: deepseek-fixture}}]}}\n\
         \x20 - {{name: spare, base_url: '{url}', models: [{{name: cutting, upstream: fixture}}]}}\n\
         \x20 - {{name: quiet, base_url: '{url}', first_byte_timeout_seconds: 0.3, models: [{{name: quiet, upstream: stall}}]}}\n\
         \x20 - {{name: claude, base_url: '{url}', adapter: anthropic, models: [{{name: claude, upstream: claude-tools}}]}}\n\
         \x20 - {{name: google, base_url: '{root}/v1beta', adapter: gemini, models: [{{name: gemini-tools}}]}}\n\
         \x20 - {{name: local, base_url: '{root}', adapter: ollama, models: [{{name: llama-tools}}]}}\n\
         \x20 - {{name: codex, base_url: '{url}', adapter: openai-responses, models: [{{name: codex, upstream: resp-tools}}]}}\n",
        url = mock.url
    );
    TestGateway::start(&config_with(&sources)).await
}

fn ask(model: &str, stream: bool) -> Value {
    let mut body = json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "Hello!"}]});
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

async fn whole(gw: &TestGateway, model: &str) -> Value {
    let response = gw.chat(ask(model, false)).await;
    assert_eq!(response.status(), 200, "{model}");
    let text = response.text().await.unwrap();
    // What an OpenAI client library reads (typed, every required field there).
    serde_json::from_str::<async_openai::types::chat::CreateChatCompletionResponse>(&text)
        .unwrap_or_else(|e| panic!("{model}: not a chat.completion ({e}): {text}"));
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn every_built_in_adapters_whole_answer_is_what_its_stream_says() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    for model in ["gpt", "gpt-tools", "ds", "claude", "gemini-tools", "llama-tools", "codex"] {
        let streamed = gw.chat(ask(model, true)).await.text().await.unwrap();
        let (chunks, done) = openai_events(&streamed);
        assert!(done, "{model}: {streamed}");
        let expected = assemble(&chunks);

        let answer = whole(&gw, model).await;
        let upstream = mock.state.requests().pop().unwrap();
        let message = &answer["choices"][0]["message"];
        assert_eq!(message["content"].as_str().unwrap_or_default(), expected.content, "{model}: {answer}");
        assert_eq!(message["reasoning_content"].as_str().unwrap_or_default(), expected.reasoning, "{model}");
        let calls: Vec<(String, String, String)> = message["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
                (text(&c["id"]), text(&c["function"]["name"]), text(&c["function"]["arguments"]))
            })
            .collect();
        assert_eq!(calls, expected.tool_calls, "{model}");
        assert_eq!(answer["choices"][0]["finish_reason"].as_str(), expected.finish.as_deref(), "{model}");
        let usage = expected.usage.expect("the stream had usage");
        for count in ["prompt_tokens", "completion_tokens"] {
            assert_eq!(answer["usage"][count], usage[count], "{model}: {count}");
        }
        if model == "gpt" {
            // The OpenAI pass-through: the body as sent, asking for a stream with usage.
            assert_eq!(
                (upstream.body["stream"].as_bool(), upstream.body["stream_options"]["include_usage"].as_bool()),
                (Some(true), Some(true))
            );
            assert_eq!(answer["system_fingerprint"], "fp_44709d6fcb");
            assert_eq!(
                (answer["object"].as_str(), answer["id"].as_str()),
                (Some("chat.completion"), Some("chatcmpl-123"))
            );
        }
    }
    // The books count what the stream reported, as for a stream.
    let logs = gw.admin_json(&gw.admin_token(), "/admin/api/logs?source=oai").await;
    let gpt = logs["rows"].as_array().unwrap().iter().find(|r| r["model"] == "gpt" && r["stream"] == false).unwrap();
    assert_eq!(
        (gpt["tokens_in"].as_u64(), gpt["tokens_out"].as_u64(), gpt["usage_estimated"].as_bool()),
        (Some(9), Some(3), Some(false))
    );
}

#[tokio::test]
async fn the_anthropic_and_responses_doors_get_their_whole_answers_from_a_stream_too() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let anthropic = reqwest::Client::new()
        .post(format!("{}/v1/messages", gw.url))
        .header("x-api-key", KEY)
        .json(&json!({"model": "gpt", "max_tokens": 100, "messages": [{"role": "user", "content": "Hello!"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(anthropic.status(), 200);
    let message: Value = anthropic.json().await.unwrap();
    assert_eq!(message["content"], json!([{"type": "text", "text": "Hello there!"}]), "{message}");
    assert_eq!(
        (message["usage"]["input_tokens"].as_u64(), message["usage"]["output_tokens"].as_u64()),
        (Some(9), Some(3))
    );
    assert_eq!(mock.state.requests().pop().unwrap().body["stream"], true);

    let responses = gw.post("/v1/responses").json(&json!({"model": "gpt", "input": "Hello!"})).send().await.unwrap();
    assert_eq!(responses.status(), 200);
    let response: Value = responses.json().await.unwrap();
    assert_eq!(response["output"][0]["content"][0]["text"], "Hello there!", "{response}");
    assert_eq!(response["usage"]["total_tokens"], 12);
}

#[tokio::test]
async fn a_silent_or_cut_stream_is_never_a_short_whole_answer() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    // 200, then nothing: given up on at the first-byte timeout (0.3 s), not timeout_seconds (120).
    let response = gw.chat(ask("quiet", false)).await;
    assert_eq!(response.status(), 504);
    let error: Value = response.json().await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("waiting for the first stream event"), "{error}");

    // Cut before its end: the attempt failed, and the next source served the whole answer.
    let answer = whole(&gw, "cutting").await;
    assert_eq!(answer["choices"][0]["message"]["content"], "Hello there!");
    let logs = gw.admin_json(&gw.admin_token(), "/admin/api/logs?source=oai").await;
    let cut = logs["rows"].as_array().unwrap().iter().find(|r| r["model"] == "cutting").unwrap().clone();
    assert_eq!(cut["error"], "stream_truncated", "{cut}");

    // An upstream that ignores `stream` and answers JSON is read as the whole answer it is.
    let response = gw.chat(ask("html", false)).await;
    assert_eq!(response.status(), 502);
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["code"], "invalid_upstream_response");
}
