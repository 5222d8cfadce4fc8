//! Same protocol in and out: an Anthropic client in front of an Anthropic upstream goes through
//! the adapter's native session. What Claude Code sends (cache markers, system blocks, adaptive
//! thinking, betas, signatures, `is_error`, fields newer than the gateway) reaches the upstream
//! as sent, the answer and every stream event come back byte for byte, and the books still
//! count the tokens; a failover to an OpenAI upstream in the same request is translated. A chat
//! client in front of an OpenAI-compatible upstream keeps its fields and its non-credential
//! headers.

use serde_json::{Value, json};

use crate::support::mock::{CLAUDE_CODE_SSE, CLAUDE_MESSAGE};
use crate::support::{KEY, MockUpstream, TestGateway, config_with};

const ADMIN: &str = "adm-passthrough-token-0001";
const UPSTREAM_KEY: &str = "sk-ant-upstream-secret-0001";

async fn gateway(mock: &MockUpstream) -> TestGateway {
    let sources = format!(
        "admin_token: {ADMIN}\nsources:\n\
         \x20 - name: claude\n    base_url: {url}\n    adapter: anthropic\n    api_key: {UPSTREAM_KEY}\n\
         \x20   settings: {{anthropic_beta: files-api-2025-04-14}}\n\
         \x20   passthrough: {{fields: [a_field_from_next_year]}}\n\
         \x20   models: [{{name: claude, upstream: claude-code}}, {{name: either, upstream: claude-overloaded}}]\n\
         \x20 - name: oai\n    base_url: {url}\n    stream_whole_answers: false\n    models: [{{name: either, upstream: fixture}}]\n",
        url = mock.url
    );
    TestGateway::start(&config_with(&sources)).await
}

/// A Claude Code turn, with everything the unified form has no place for.
fn claude_code_request(stream: bool) -> Value {
    json!({
        "model": "claude", "max_tokens": 32000, "stream": stream,
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
            {"type": "text", "text": "<env>cwd: /repo</env>", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix the failing test", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Run the tests first.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrk"},
                {"type": "tool_use", "id": "toolu_01A", "name": "Bash", "input": {"command": "cargo test"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "is_error": true, "content": "exit 101", "cache_control": {"type": "ephemeral"}},
            ]},
            {"role": "system", "content": [{"type": "text", "text": "Plan mode is off."}]},
            {"role": "user", "content": "Go on."},
        ],
        "tools": [
            {"name": "Bash", "description": "Runs a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}, "cache_control": {"type": "ephemeral"}},
            {"name": "WebFetch", "description": "Fetches a URL", "input_schema": {"type": "object"}, "defer_loading": true},
        ],
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100000}}]},
        "metadata": {"user_id": "user_4f2a_account_9c1e_session_77b0"},
        "a_field_from_next_year": {"kept": [1, 2, 3]},
    })
}

async fn send(gw: &TestGateway, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/messages", gw.url))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14,context-management-2025-06-27")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The request the upstream saw must be the client's, with only the model replaced, and carry
/// the client's betas and version with the source's credentials.
fn assert_forwarded_as_sent(mock: &MockUpstream, sent: &Value) {
    let seen = mock.state.requests().pop().expect("the upstream was called");
    let mut expected = sent.clone();
    expected["model"] = json!("claude-code");
    assert_eq!(seen.body, expected, "every field reaches the upstream as sent");
    let header = |name: &str| seen.headers.get(name).map(|v| v.to_str().unwrap().to_string());
    assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
    assert_eq!(
        header("anthropic-beta").as_deref(),
        Some("interleaved-thinking-2025-05-14,context-management-2025-06-27,files-api-2025-04-14"),
        "the client's betas, then the source's"
    );
    assert_eq!(header("x-api-key").as_deref(), Some(UPSTREAM_KEY));
    assert!(
        seen.headers.values().all(|v| !v.to_str().unwrap_or_default().contains(KEY)),
        "the gateway key never goes upstream: {:?}",
        seen.headers
    );
}

async fn last_log(gw: &TestGateway) -> Value {
    gw.admin_json(ADMIN, "/admin/api/logs?source=claude").await["rows"][0].clone()
}

#[tokio::test]
async fn a_claude_code_turn_reaches_an_anthropic_upstream_as_sent_and_comes_back_byte_for_byte() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;

    let request = claude_code_request(false);
    let response = send(&gw, &request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.text().await.unwrap(), CLAUDE_MESSAGE, "the upstream's answer, untouched");
    assert_forwarded_as_sent(&mock, &request);
    let row = last_log(&gw).await;
    assert_eq!(
        (row["status"].as_u64(), row["tokens_in"].as_u64(), row["tokens_out"].as_u64(), row["tokens_cached"].as_u64()),
        (Some(200), Some(2095 + 1800 + 100), Some(503), Some(1800)),
        "the books read the usage, cache reads and writes included: {row}"
    );

    let request = claude_code_request(true);
    let response = send(&gw, &request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(
        response.text().await.unwrap(),
        CLAUDE_CODE_SSE,
        "every event as the upstream sent it: signature_delta, redacted_thinking, ping, cache usage"
    );
    assert_forwarded_as_sent(&mock, &request);
    let row = last_log(&gw).await;
    assert_eq!(
        (row["status"].as_u64(), row["tokens_in"].as_u64(), row["tokens_out"].as_u64(), row["tokens_cached"].as_u64()),
        (Some(200), Some(12 + 48210 + 310), Some(89), Some(48210)),
        "{row}"
    );
    assert_eq!(row["usage_estimated"], false, "{row}");
}

#[tokio::test]
async fn a_native_attempt_that_fails_over_to_an_openai_upstream_is_translated() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let mut request = claude_code_request(false);
    request["model"] = json!("either");
    let response = send(&gw, &request).await;
    assert_eq!(response.status(), 200);
    let message: Value = response.json().await.unwrap();
    assert_eq!(message["type"], "message", "{message}");
    assert_eq!(message["content"][0]["text"], "\n\nHello there, how may I assist you today?", "{message}");
    let calls = mock.state.requests();
    let (first, second) = (&calls[calls.len() - 2], &calls[calls.len() - 1]);
    assert_eq!(first.body["model"], "claude-overloaded", "the Anthropic source was tried natively first");
    assert_eq!(first.body["context_management"], request["context_management"]);
    assert_eq!(second.body["model"], "fixture");
    assert!(second.body.get("context_management").is_none(), "the OpenAI source got the unified form");
    assert_eq!(
        second.body["messages"][0],
        json!({"role": "system", "content": "You are Claude Code, Anthropic's official CLI for Claude.\n\n<env>cwd: /repo</env>"})
    );
}

#[tokio::test]
async fn a_cut_native_stream_ends_in_an_error_event_after_what_arrived() {
    let mock = MockUpstream::start().await;
    let sources = format!(
        "sources:\n  - name: claude\n    base_url: {}\n    adapter: anthropic\n    models: [{{name: claude-cut}}]\n",
        mock.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    let mut request = claude_code_request(true);
    request["model"] = json!("claude-cut");
    let body = send(&gw, &request).await.text().await.unwrap();
    let upstream = crate::support::mock::CLAUDE_TEXT_SSE;
    let delivered = &upstream[..upstream.find("event: message_delta").unwrap()];
    let (before, error) = body.split_at(delivered.len());
    assert_eq!(before, delivered, "what the upstream sent before the cut reached the client as it was");
    assert!(error.starts_with("event: error\n"), "{error}");
    assert!(error.contains("message_stop"), "the error says what never came: {error}");
}

#[tokio::test]
async fn count_tokens_asks_an_anthropic_upstream_and_estimates_elsewhere() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let count = |model: &str| {
        let mut body = claude_code_request(false);
        body["model"] = json!(model);
        body.as_object_mut().unwrap().remove("max_tokens");
        body.as_object_mut().unwrap().remove("stream");
        let gw = &gw;
        async move {
            reqwest::Client::new()
                .post(format!("{}/v1/messages/count_tokens", gw.url))
                .header("x-api-key", KEY)
                .header("anthropic-beta", "token-counting-2024-11-01")
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let counted = count("claude").await;
    assert_eq!(counted.status(), 200);
    assert!(counted.headers().get("x-switchyard-estimate").is_none());
    assert_eq!(counted.text().await.unwrap(), "{\"input_tokens\":2095}", "the upstream's own count");
    let seen = mock.state.requests().pop().unwrap();
    assert_eq!(seen.body["model"], "claude-code");
    assert_eq!(seen.body["system"][1]["cache_control"]["type"], "ephemeral", "counted as sent");
    assert!(seen.headers["anthropic-beta"].to_str().unwrap().starts_with("token-counting-2024-11-01"));

    let logged = gw.admin_json(ADMIN, "/admin/api/logs").await;
    assert_eq!(logged["total"], 1, "the upstream call is logged: {logged}");
    assert_eq!(
        (logged["rows"][0]["mode"].as_str(), logged["rows"][0]["tokens_in"].as_u64()),
        (Some("count_tokens"), Some(0))
    );

    let unknown = count("gpt-only").await;
    assert_eq!(unknown.status(), 404, "an unknown model is refused as /v1/messages would");
    assert_eq!(unknown.json::<Value>().await.unwrap()["error"]["type"], "not_found_error");
}

#[tokio::test]
async fn a_block_the_gateway_cannot_translate_still_goes_to_an_anthropic_upstream_as_sent() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let document = json!({"model": "claude", "max_tokens": 1024, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Summarise the PDF."},
    ]}]});
    let response = send(&gw, &document).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    assert_eq!(mock.state.requests().pop().unwrap().body["messages"][0]["content"][0]["type"], "document");

    let mut elsewhere = document.clone();
    elsewhere["model"] = json!("either");
    let calls = mock.state.requests().len();
    // `either`: the Anthropic source answers 529, and the OpenAI one cannot take a document.
    let response = send(&gw, &elsewhere).await;
    assert_eq!(response.status(), 503);
    let error: Value = response.json().await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("document"), "{error}");
    assert_eq!(mock.state.requests().len(), calls + 1, "only the Anthropic source was called");
}

/// The same Claude Code turn to upstreams of other protocols: translated as docs/protocols.md
/// says (system blocks joined, the mid-conversation system message kept in place, adaptive
/// thinking at its effort where the model takes one, an `is_error` result marked, tools as
/// functions), never a 400.
#[tokio::test]
async fn a_claude_code_turn_to_openai_and_gemini_upstreams_maps_as_documented() {
    let mock = MockUpstream::start().await;
    let sources = format!(
        "sources:\n  - {{name: oai, base_url: '{url}', settings: {{prompt_cache_key: send}}, models: [{{name: gpt, upstream: fixture}}, {{name: reasoner, upstream: o3-2025-04-16}}]}}\n\
         \x20 - {{name: google, base_url: '{root}/v1beta', adapter: gemini, models: [{{name: gem, upstream: gemini-2.5-flash}}]}}\n",
        url = mock.url,
        root = mock.url.trim_end_matches("/v1")
    );
    let gw = TestGateway::start(&config_with(&sources)).await;

    let mut request = claude_code_request(false);
    request["model"] = json!("gpt");
    let response = send(&gw, &request).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let seen = mock.state.requests().pop().unwrap().body;
    let roles: Vec<&str> = seen["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "system", "user"], "{seen}");
    assert_eq!(
        seen["messages"][0]["content"],
        "You are Claude Code, Anthropic's official CLI for Claude.\n\n<env>cwd: /repo</env>"
    );
    assert_eq!(
        seen["messages"][2]["reasoning_signature"], "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrk",
        "the signature rides along"
    );
    assert_eq!(seen["messages"][3]["content"], "Error: exit 101", "is_error marks the result");
    assert_eq!(seen["messages"][4]["content"], "Plan mode is off.");
    assert!(
        seen.get("reasoning_effort").is_none() && seen.get("reasoning_effort_hint").is_none(),
        "a model outside OpenAI's reasoning families gets no effort (it would refuse the field): {seen}"
    );
    let tools: Vec<&str> =
        seen["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(tools, ["Bash", "WebFetch"]);
    assert_eq!(seen["user"], "user_4f2a_account_9c1e_session_77b0", "metadata.user_id");
    for field in ["context_management", "output_config", "thinking", "a_field_from_next_year"] {
        assert!(seen.get(field).is_none(), "{field} has no OpenAI equivalent: {seen}");
    }

    // Cache markers → OpenAI's nearest, a prompt_cache_key: the same on every turn of the prefix.
    let key = seen["prompt_cache_key"].as_str().expect("a cache key for the marked prefix").to_string();
    assert!(key.starts_with("sy-") && seen.get("prompt_cache_key_hint").is_none(), "{seen}");
    let mut later = request.clone();
    later["messages"].as_array_mut().unwrap().push(json!({"role": "assistant", "content": "Done."}));
    later["messages"].as_array_mut().unwrap().push(json!({"role": "user", "content": "Thanks"}));
    assert_eq!(send(&gw, &later).await.status(), 200);
    assert_eq!(
        mock.state.requests().pop().unwrap().body["prompt_cache_key"],
        key.as_str(),
        "a later turn, the same key"
    );
    let mut other = request.clone();
    other["system"][1]["text"] = json!("<env>cwd: /other</env>");
    assert_eq!(send(&gw, &other).await.status(), 200);
    assert_ne!(
        mock.state.requests().pop().unwrap().body["prompt_cache_key"],
        key.as_str(),
        "another prefix, another key"
    );

    // A translated stream says in message_start what the input is estimated at, not 0.
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let body = send(&gw, &streamed).await.text().await.unwrap();
    let start = crate::support::anthropic_events(&body).into_iter().next().unwrap();
    assert_eq!(start.0, "message_start");
    assert!(start.1["message"]["usage"]["input_tokens"].as_u64().unwrap() > 100, "{}", start.1);

    request["model"] = json!("reasoner");
    assert_eq!(send(&gw, &request).await.status(), 200);
    assert_eq!(
        mock.state.requests().pop().unwrap().body["reasoning_effort"],
        "high",
        "a reasoning model gets the effort"
    );

    request["model"] = json!("gem");
    let response = send(&gw, &request).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let seen = mock.state.requests().pop().unwrap().body["body"].clone();
    assert!(
        seen["systemInstruction"]["parts"][0]["text"].as_str().unwrap().starts_with("You are Claude Code"),
        "{seen}"
    );
    assert_eq!(seen["generationConfig"]["thinkingConfig"]["thinkingBudget"], 24576, "adaptive at high effort: {seen}");
    let declared: Vec<&str> = seen["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(declared, ["Bash", "WebFetch"]);
}

#[tokio::test]
async fn a_chat_client_reaches_an_openai_upstream_with_its_fields_and_headers_and_is_metered() {
    let mock = MockUpstream::start().await;
    let sources = format!(
        "admin_token: {ADMIN}\nsources:\n  - {{name: oai, base_url: '{}', stream_whole_answers: false, api_key: sk-oai-upstream-0001, models: [{{name: gpt, upstream: fixture}}, {{name: gpt-nodone, upstream: no-done}}]}}\n",
        mock.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    let body = json!({"model": "gpt", "stream": true, "stream_options": {"include_usage": false, "chunk_size": 3},
        "messages": [{"role": "user", "content": "Hello!"}], "future_field": {"nested": [1, 2]}, "service_tier": "flex"});
    let sent = gw
        .post("/v1/chat/completions")
        .header("openai-beta", "new-thing=v1")
        .header("http-referer", "https://app.example")
        .header("x-title", "Example App")
        .header("openai-organization", "org-client-own")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    let text = sent.text().await.unwrap();
    let (chunks, done) = crate::support::openai_events(&text);
    assert!(done, "{text}");
    assert!(chunks.iter().all(|c| !c["usage"].is_object()), "the client did not ask for usage: {text}");
    assert_eq!(crate::support::assemble(&chunks).content, "Hello there!");

    let seen = mock.state.requests().pop().unwrap();
    let mut expected = body.clone();
    expected["model"] = json!("fixture");
    expected["stream_options"]["include_usage"] = json!(true);
    assert_eq!(seen.body, expected, "every field as sent; only the model and the usage switch changed");
    let header = |name: &str| seen.headers.get(name).map(|v| v.to_str().unwrap().to_string());
    assert_eq!(
        (header("openai-beta"), header("http-referer"), header("x-title")),
        (Some("new-thing=v1".into()), Some("https://app.example".into()), Some("Example App".into()))
    );
    assert_eq!(header("openai-organization"), None, "the client's account stays home");
    assert_eq!(header("authorization").as_deref(), Some("Bearer sk-oai-upstream-0001"));
    let row = &gw.admin_json(ADMIN, "/admin/api/logs?source=oai").await["rows"][0];
    assert_eq!(
        (row["tokens_in"].as_u64(), row["tokens_out"].as_u64(), row["usage_estimated"].as_bool()),
        (Some(9), Some(3), Some(false))
    );

    // An upstream that closes after its usage chunk without `[DONE]`: complete, and the
    // client still gets its `[DONE]`.
    let text = gw
        .chat(json!({"model": "gpt-nodone", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}))
        .await
        .text()
        .await
        .unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let json_answer =
        gw.chat(json!({"model": "gpt", "messages": [{"role": "user", "content": "Hi"}]})).await.text().await.unwrap();
    assert_eq!(json_answer, crate::support::mock::CHAT_JSON, "a whole answer byte for byte");
}
