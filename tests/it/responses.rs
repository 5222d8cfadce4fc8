//! `POST /v1/responses` through a real client library (async-openai's Responses types parse
//! every answer and event) against OpenAI-chat, Anthropic, Gemini, Ollama and native Responses
//! upstreams: text, streamed function calls, Codex-shaped requests, cut and failed streams
//! ending in exactly one `response.failed`, and stored turns continued by `previous_response_id`.

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::responses::{CreateResponse, ResponseStreamEvent};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::{KEY, MockUpstream, TestGateway, config_with};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    let sources = format!(
        "sources:\n  - {{name: oai, base_url: '{url}', stream_whole_answers: false, models: [{{name: gpt, upstream: fixture}}, {{name: gpt-tools, upstream: tools}}, {{name: gpt-cut, upstream: cut}}]}}\n\
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
async fn functions_in_a_namespace_reach_a_chat_upstream_flat_and_come_back_in_their_namespace() {
    let mock = MockUpstream::start().await;
    let sources = format!(
        "sources:\n  - {{name: oai, base_url: '{}', stream_whole_answers: false, models: [{{name: gpt-call, upstream: call-last-tool}}]}}\n",
        mock.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    let mut codex = json!({
        "model": "gpt-call", "store": false,
        "tools": [
            {"type": "function", "name": "shell", "parameters": {"type": "object"}},
            {"type": "namespace", "name": "mcp__files", "description": "Files on the host", "tools": [
                {"type": "function", "name": "read", "description": "Reads a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]},
        ],
        "input": [
            {"type": "message", "role": "user", "content": "Read a.txt"},
            {"type": "function_call", "call_id": "call_0", "namespace": "mcp__files", "name": "read", "arguments": "{\"path\":\"b.txt\"}"},
            {"type": "function_call_output", "call_id": "call_0", "output": "b"},
        ],
    });
    let response: Value = post_responses(&gw, KEY, &codex).await.json().await.unwrap();
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(seen["tools"][1]["function"]["name"], "mcp__files__read", "flattened for the chat upstream");
    assert_eq!(seen["tools"][1]["function"]["description"], "Reads a file");
    assert_eq!(seen["messages"][1]["tool_calls"][0]["function"]["name"], "mcp__files__read", "the history's call too");
    let call = &response["output"][0];
    assert_eq!(
        (call["type"].as_str(), call["namespace"].as_str(), call["name"].as_str(), call["call_id"].as_str()),
        (Some("function_call"), Some("mcp__files"), Some("read"), Some("call_last"))
    );

    codex["stream"] = json!(true);
    let body = post_responses(&gw, KEY, &codex).await.text().await.unwrap();
    let events: Vec<Value> =
        body.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
    let items: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.added" || e["type"] == "response.output_item.done")
        .map(|e| &e["item"])
        .collect();
    assert_eq!(items.len(), 2);
    for item in items {
        assert_eq!((item["namespace"].as_str(), item["name"].as_str()), (Some("mcp__files"), Some("read")), "{item}");
    }
    let completed = events.iter().find(|e| e["type"] == "response.completed").expect("completed");
    assert_eq!(completed["response"]["output"][0]["namespace"], "mcp__files");
}

#[tokio::test]
async fn a_cut_upstream_stream_ends_in_exactly_one_response_failed() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    for (model, delivered) in [("claude-cut", "Hello!"), ("gpt-cut", "Hello there!")] {
        let mut stream = client(&gw).responses().create_stream(request(model)).await.unwrap();
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
        assert_eq!(text, delivered, "{model}: what arrived before the cut was delivered");
        assert_eq!(terminal.len(), 1, "{model}: {terminal:?}");
        assert_eq!(terminal[0].0, "failed", "{model}");
        // One of the codes the Responses API defines; the gateway's own leads the message.
        assert_eq!(terminal[0].1["code"], "server_error", "{model}: {:?}", terminal[0].1);
        assert!(terminal[0].1["message"].as_str().unwrap().starts_with("stream_truncated: "), "{:?}", terminal[0].1);
    }
}

const ADMIN: &str = "adm-responses-token-0001";
const OTHER_KEY: &str = "sk-test-gateway-key-0002";

/// A gateway with a Responses upstream (`codex`), a chat upstream (`oai`), two keys and logs.
async fn gateway_with_responses_upstream(mock: &MockUpstream) -> TestGateway {
    let yaml = config_with(&format!(
        "  - {{name: other, key: {OTHER_KEY}, models: [\"*\"]}}\nadmin_token: {ADMIN}\nsources:\n\
         \x20 - {{name: codex, base_url: '{url}', stream_whole_answers: false, adapter: openai-responses, api_key: sk-upstream-responses-0001, models: [{{name: gpt-5-codex, upstream: resp-tools}}, {{name: codex-cut, upstream: resp-cut}}, {{name: codex-failed, upstream: resp-failed}}]}}\n\
         \x20 - {{name: oai, base_url: '{url}', stream_whole_answers: false, models: [{{name: gpt, upstream: fixture}}]}}\n",
        url = mock.url
    ));
    TestGateway::start(&yaml).await
}

fn codex_request(model: &str) -> Value {
    json!({
        "model": model, "instructions": "You are Codex.", "stream": true, "store": false,
        "reasoning": {"effort": "medium", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0195-session", "parallel_tool_calls": false, "tool_choice": "auto",
        "text": {"verbosity": "low"},
        "tools": [
            {"type": "function", "name": "shell", "strict": false, "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}}},
            {"type": "web_search"},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
            {"type": "namespace", "name": "mcp__files", "description": "Files on the host", "tools": [{"type": "function", "name": "read", "description": "Reads a file", "parameters": {"type": "object"}}]},
        ],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>read-only</permissions>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files"}]},
            {"type": "reasoning", "id": "rs_prev", "summary": [], "encrypted_content": "gAAAAABprevious"},
            {"type": "function_call", "call_id": "call_prev", "name": "shell", "arguments": "{\"command\":[\"pwd\"]}"},
            {"type": "function_call_output", "call_id": "call_prev", "output": "/repo"},
        ],
    })
}

async fn post_responses(gw: &TestGateway, key: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new().post(format!("{}/v1/responses", gw.url)).bearer_auth(key).json(body).send().await.unwrap()
}

#[tokio::test]
async fn a_responses_upstream_gets_codex_requests_as_sent_and_the_client_its_events_as_sent() {
    use crate::support::mock::{OPENAI_RESPONSES, OPENAI_RESPONSES_SSE};
    let mock = MockUpstream::start().await;
    let gw = gateway_with_responses_upstream(&mock).await;

    let request = codex_request("gpt-5-codex");
    let response = post_responses(&gw, KEY, &request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), OPENAI_RESPONSES_SSE, "every event as the upstream sent it");
    let seen = mock.state.requests().pop().unwrap();
    let mut expected = request.clone();
    expected["model"] = json!("resp-tools");
    assert_eq!(seen.body, expected, "built-in tools, custom tools, reasoning items and include reach the upstream");
    assert_eq!(
        seen.headers["authorization"], "Bearer sk-upstream-responses-0001",
        "the source's key, never the client's"
    );
    let rows = gw.admin_json(ADMIN, "/admin/api/logs?source=codex").await;
    let row = &rows["rows"][0];
    assert_eq!(
        (row["tokens_in"].as_u64(), row["tokens_out"].as_u64(), row["tokens_cached"].as_u64()),
        (Some(5120), Some(96), Some(4864)),
        "{row}"
    );

    // The official SDK's types read every event of the native stream.
    let mut stream = client(&gw)
        .responses()
        .create_stream(serde_json::from_value(codex_request("gpt-5-codex")).unwrap())
        .await
        .unwrap();
    let mut calls = Vec::new();
    while let Some(event) = stream.next().await {
        if let ResponseStreamEvent::ResponseOutputItemDone(done) = event.expect("an event the SDK reads") {
            calls.push(serde_json::to_value(&done.item).unwrap());
        }
    }
    assert_eq!(calls[0]["encrypted_content"], "gAAAAABpM0vX7eYrS3bE0c1Q9z_encrypted_reasoning_state");
    assert_eq!(calls[1]["arguments"], "{\"command\":[\"ls\",\"-la\"]}");

    // What the unified form cannot carry still goes to a Responses upstream, and only there.
    let file = json!({"model": "gpt-5-codex", "input": [{"role": "user", "content": [
        {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="},
        {"type": "input_text", "text": "Summarise"}]}]});
    assert_eq!(post_responses(&gw, KEY, &file).await.status(), 200);
    assert_eq!(mock.state.requests().pop().unwrap().body["input"][0]["content"][0]["type"], "input_file");
    let mut elsewhere = file.clone();
    elsewhere["model"] = json!("gpt");
    let refused = post_responses(&gw, KEY, &elsewhere).await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("input_file"));

    // A built-in tool the client requires: served natively, refused (not dropped) elsewhere.
    let search = json!({"model": "gpt-5-codex", "input": "news?", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}});
    assert_eq!(post_responses(&gw, KEY, &search).await.status(), 200);
    let mut elsewhere = search.clone();
    elsewhere["model"] = json!("gpt");
    let refused = post_responses(&gw, KEY, &elsewhere).await;
    assert_eq!(refused.status(), 400);
    let refused: Value = refused.json().await.unwrap();
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("tool_choice requires the built-in tool `web_search`"),
        "{refused}"
    );

    let mut whole = codex_request("gpt-5-codex");
    whole["stream"] = json!(false);
    let response = post_responses(&gw, KEY, &whole).await;
    assert_eq!(response.text().await.unwrap(), OPENAI_RESPONSES, "the upstream's response object, untouched");
}

/// The terminal events of a Responses stream, with their sequence numbers.
fn terminals(body: &str) -> (Vec<(String, u64)>, Vec<u64>) {
    let events: Vec<Value> = body
        .split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let sequence = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
    let terminal = events
        .iter()
        .filter(|e| {
            matches!(e["type"].as_str(), Some("response.completed" | "response.incomplete" | "response.failed"))
        })
        .map(|e| (e["type"].as_str().unwrap().to_string(), e["sequence_number"].as_u64().unwrap()))
        .collect();
    (terminal, sequence)
}

#[tokio::test]
async fn a_native_stream_cut_or_failed_upstream_ends_in_exactly_one_response_failed() {
    let mock = MockUpstream::start().await;
    let gw = gateway_with_responses_upstream(&mock).await;
    for (model, code) in [("codex-cut", "server_error"), ("codex-failed", "server_error")] {
        let body = post_responses(&gw, KEY, &codex_request(model)).await.text().await.unwrap();
        let (terminal, sequence) = terminals(&body);
        assert_eq!(terminal.len(), 1, "{model}: {body}");
        assert_eq!(terminal[0].0, "response.failed", "{model}");
        assert!(
            sequence.windows(2).all(|w| w[1] == w[0] + 1),
            "{model}: numbered on from the upstream's: {sequence:?}"
        );
        let failed: Value = serde_json::from_str(
            body.rsplit("\n\n")
                .find(|e| e.contains("response.failed"))
                .unwrap()
                .lines()
                .last()
                .unwrap()
                .strip_prefix("data: ")
                .unwrap(),
        )
        .unwrap();
        assert_eq!(failed["response"]["error"]["code"], code, "{model}: {failed}");
        assert_eq!(failed["response"]["id"], "resp_0f3a9c1d2e4b5a6978", "{model}: the upstream's response id");
    }
}

#[tokio::test]
async fn chat_clients_reach_a_responses_upstream_translated() {
    let mock = MockUpstream::start().await;
    let gw = gateway_with_responses_upstream(&mock).await;
    let response = gw
        .chat(json!({"model": "gpt-5-codex", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell a story"}], "max_tokens": 50}))
        .await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert!(
        answer["choices"][0]["message"]["content"].as_str().unwrap().starts_with("In a peaceful grove"),
        "{answer}"
    );
    assert_eq!(
        (answer["usage"]["prompt_tokens"].as_u64(), answer["usage"]["completion_tokens"].as_u64()),
        (Some(36), Some(87))
    );
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(
        (seen["instructions"].as_str(), seen["max_output_tokens"].as_u64(), seen["store"].as_bool()),
        (Some("Be brief."), Some(50), Some(false))
    );
    assert_eq!(seen["input"], json!([{"type": "message", "role": "user", "content": "Tell a story"}]));

    let body = gw
        .chat(json!({"model": "gpt-5-codex", "stream": true, "messages": [{"role": "user", "content": "ls"}]}))
        .await
        .text()
        .await
        .unwrap();
    let (chunks, done) = crate::support::openai_events(&body);
    let answer = crate::support::assemble(&chunks);
    assert!(done, "{body}");
    assert_eq!(answer.finish.as_deref(), Some("tool_calls"));
    assert_eq!(answer.tool_calls[0].2, "{\"command\":[\"ls\",\"-la\"]}", "{body}");
}

#[tokio::test]
async fn stored_responses_continue_a_conversation_for_their_own_key_only() {
    let mock = MockUpstream::start().await;
    let gw = gateway_with_responses_upstream(&mock).await;
    let first: Value = post_responses(&gw, KEY, &json!({"model": "gpt", "input": "Hello"})).await.json().await.unwrap();
    let id = first["id"].as_str().unwrap().to_string();
    assert_eq!(first["store"], true, "{first}");

    let second = post_responses(
        &gw,
        KEY,
        &json!({"model": "gpt", "input": "And again?", "previous_response_id": id, "instructions": "Be new."}),
    )
    .await;
    assert_eq!(second.status(), 200);
    let second: Value = second.json().await.unwrap();
    assert_eq!(second["previous_response_id"], id.as_str());
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(
        seen["messages"],
        json!([
            {"role": "system", "content": "Be new."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "\n\nHello there, how may I assist you today?"},
            {"role": "user", "content": "And again?"},
        ]),
        "the stored turn replayed before the new input"
    );

    let third =
        post_responses(&gw, KEY, &json!({"model": "gpt", "input": "Third", "previous_response_id": second["id"]}))
            .await;
    assert_eq!(third.status(), 200);
    assert_eq!(
        mock.state.requests().pop().unwrap().body["messages"].as_array().unwrap().len(),
        5,
        "two turns replayed"
    );

    let refused =
        post_responses(&gw, OTHER_KEY, &json!({"model": "gpt", "input": "x", "previous_response_id": id})).await;
    assert_eq!(refused.status(), 404, "another key's conversation does not exist for it");
    assert_eq!(refused.json::<Value>().await.unwrap()["error"]["code"], "previous_response_not_found");

    let url = format!("{}/v1/responses/{id}", gw.url);
    let http = reqwest::Client::new();
    let got: Value = http.get(&url).bearer_auth(KEY).send().await.unwrap().json().await.unwrap();
    assert_eq!((got["id"].as_str(), got["output"][0]["type"].as_str()), (Some(id.as_str()), Some("message")));
    assert_eq!(http.get(&url).bearer_auth(OTHER_KEY).send().await.unwrap().status(), 404);
    let deleted = http.delete(&url).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(deleted.json::<Value>().await.unwrap()["deleted"], true);
    assert_eq!(http.get(&url).bearer_auth(KEY).send().await.unwrap().status(), 404);

    let unstored: Value =
        post_responses(&gw, KEY, &json!({"model": "gpt", "input": "Hi", "store": false})).await.json().await.unwrap();
    let continued =
        post_responses(&gw, KEY, &json!({"model": "gpt", "input": "x", "previous_response_id": unstored["id"]})).await;
    assert_eq!(continued.status(), 404, "store: false keeps nothing");

    // A streamed turn is stored when it completes, and continues like any other.
    let streamed = post_responses(&gw, KEY, &json!({"model": "gpt", "input": "Stream it", "stream": true}))
        .await
        .text()
        .await
        .unwrap();
    let completed = streamed.split("\n\n").find(|e| e.starts_with("event: response.completed")).expect("completed");
    let completed: Value =
        serde_json::from_str(completed.lines().last().unwrap().strip_prefix("data: ").unwrap()).unwrap();
    let next = post_responses(
        &gw,
        KEY,
        &json!({"model": "gpt", "input": "next", "previous_response_id": completed["response"]["id"]}),
    )
    .await;
    assert_eq!(next.status(), 200);
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(seen["messages"][0], json!({"role": "user", "content": "Stream it"}));
}

#[tokio::test]
async fn a_conversation_replayed_past_the_body_limit_is_refused_not_sent() {
    let mock = MockUpstream::start().await;
    let yaml = config_with(&format!(
        "body_limit_mb: 1\nsources:\n  - {{name: oai, base_url: '{}', stream_whole_answers: false, models: [{{name: gpt, upstream: fixture}}]}}\n",
        mock.url
    ));
    let gw = TestGateway::start(&yaml).await;
    let big = "x".repeat(600 << 10);
    let first: Value = post_responses(&gw, KEY, &json!({"model": "gpt", "input": big})).await.json().await.unwrap();
    let second =
        post_responses(&gw, KEY, &json!({"model": "gpt", "input": big, "previous_response_id": first["id"]})).await;
    assert_eq!(second.status(), 200, "one stored turn and a new one fit");
    let second: Value = second.json().await.unwrap();
    let calls = mock.state.requests().len();
    let third =
        post_responses(&gw, KEY, &json!({"model": "gpt", "input": "more", "previous_response_id": second["id"]})).await;
    assert_eq!(third.status(), 413, "two stored turns of 600 KiB are more than body_limit_mb: 1");
    assert_eq!(third.json::<Value>().await.unwrap()["error"]["code"], "request_too_large");
    assert_eq!(mock.state.requests().len(), calls, "nothing was sent upstream");
}
