//! The Anthropic front door `/v1/messages`: Anthropic clients reaching OpenAI and Anthropic
//! upstreams, JSON and SSE, tool_use input intact, errors in Anthropic's format. Ends with the
//! client-protocol × upstream-protocol matrix, tools and streaming on every cell.

use serde_json::{Value, json};

use crate::support::{KEY, MockUpstream, TestGateway, anthropic_events, assemble, config_with, openai_events};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    // Whole answers asked as sent: these tests read each adapter's JSON path (the default,
    // a whole answer put together from a stream, is tests/it/whole_answers.rs).
    let sources = format!(
        "sources:\n  - name: oai\n    base_url: {url}\n    stream_whole_answers: false\n    models: [{{name: gpt, upstream: fixture}}, {{name: gpt-tools, upstream: tools}}, {{name: gpt-limited, upstream: error-429}}]\n  - name: claude\n    base_url: {url}\n    stream_whole_answers: false\n    adapter: anthropic\n    models: [{{name: claude, upstream: claude-text}}, {{name: claude-tools, upstream: claude-tools}}]\n  - name: local\n    base_url: {root}\n    stream_whole_answers: false\n    adapter: ollama\n    models: [{{name: llama-tools}}]\n  - name: google\n    base_url: {root}/v1beta\n    stream_whole_answers: false\n    adapter: gemini\n    models: [{{name: gemini-tools}}]\n",
        url = mock.url,
        root = mock.url.trim_end_matches("/v1")
    );
    TestGateway::start(&config_with(&sources)).await
}

fn anthropic_request(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "max_tokens": 1024,
        "stream": stream,
        "system": [{"type": "text", "text": "You are terse."}],
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]}, {"type": "text", "text": "And now?"}]},
        ],
    })
}

async fn post_messages(gw: &TestGateway, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/messages", gw.url))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_anthropic_request_reaches_an_openai_upstream_in_unified_form() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let response = post_messages(&gw, &anthropic_request("gpt", false)).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("request-id"));
    let message: Value = response.json().await.unwrap();
    assert_eq!(
        message,
        json!({
            "id": "msg_chatcmpl-123", "type": "message", "role": "assistant", "model": "gpt-4o-mini",
            "content": [{"type": "text", "text": "\n\nHello there, how may I assist you today?"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 9, "output_tokens": 12, "cache_read_input_tokens": 0},
        })
    );
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(
        seen["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
            {"role": "user", "content": [{"type": "text", "text": "And now?"}]},
        ])
    );
    assert_eq!(seen["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(seen["max_tokens"], 1024);
}

#[tokio::test]
async fn an_anthropic_stream_from_an_anthropic_upstream_keeps_tool_use_input() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let body = post_messages(&gw, &anthropic_request("claude-tools", true)).await.text().await.unwrap();
    let events = anthropic_events(&body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    // Rebuild each block as a client would.
    let mut blocks: Vec<(Value, String)> = Vec::new();
    for (name, data) in &events {
        match name.as_str() {
            "content_block_start" => {
                assert_eq!(data["index"].as_u64().unwrap() as usize, blocks.len(), "blocks open in order");
                blocks.push((data["content_block"].clone(), String::new()));
            }
            "content_block_delta" => {
                let block = &mut blocks[data["index"].as_u64().unwrap() as usize];
                block.1.push_str(data["delta"]["text"].as_str().or(data["delta"]["partial_json"].as_str()).unwrap());
            }
            _ => {}
        }
    }
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0].1, "Okay, let's check the weather.");
    assert_eq!(blocks[1].0["id"], "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    let input: Value = serde_json::from_str(&blocks[1].1).unwrap();
    assert_eq!(input, json!({"location": "San Francisco, CA", "unit": "fahrenheit"}));
    assert_eq!(blocks[2].0["name"], "get_time");
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 89);
    // Anthropic → Anthropic is forwarded as sent: input tokens are in message_start, as upstream put them.
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 472);
}

#[tokio::test]
async fn errors_come_back_in_anthropic_format() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let response = post_messages(&gw, &anthropic_request("no-such-model", false)).await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "not_found_error");

    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", gw.url))
        .json(&anthropic_request("gpt", false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["type"], "authentication_error");

    let mut bad = anthropic_request("gpt", false);
    bad["messages"][0]["role"] = json!("robot");
    let response = post_messages(&gw, &bad).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("messages[0].role"), "{body}");

    let response = post_messages(&gw, &anthropic_request("gpt-limited", false)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "20", "the upstream's Retry-After, whatever the front door");
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["type"], "rate_limit_error");
}

/// What one cell of the matrix produced, in protocol-neutral terms.
#[derive(Debug, PartialEq)]
struct Outcome {
    text: String,
    /// (name, parsed arguments) per tool call, in order.
    tools: Vec<(String, Value)>,
    stop: String,
}

async fn via_openai(gw: &TestGateway, model: &str) -> Outcome {
    let request = json!({"model": model, "stream": true, "messages": [{"role": "user", "content": "Weather?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]});
    let (chunks, done) = openai_events(&gw.chat(request).await.text().await.unwrap());
    assert!(done, "{model}: stream completes");
    let all = assemble(&chunks);
    Outcome {
        text: all.content,
        tools: all.tool_calls.into_iter().map(|(_, name, args)| (name, serde_json::from_str(&args).unwrap())).collect(),
        stop: all.finish.unwrap(),
    }
}

async fn via_anthropic(gw: &TestGateway, model: &str) -> Outcome {
    let mut request = anthropic_request(model, true);
    request["messages"] = json!([{"role": "user", "content": "Weather?"}]);
    let events = anthropic_events(&post_messages(gw, &request).await.text().await.unwrap());
    assert_eq!(events.last().unwrap().0, "message_stop", "{model}: stream completes");
    let mut text = String::new();
    let mut tools: Vec<(String, String)> = Vec::new();
    let mut kinds = Vec::new();
    let mut stop = String::new();
    for (name, data) in &events {
        match name.as_str() {
            "content_block_start" => {
                kinds.push(data["content_block"]["type"].as_str().unwrap().to_string());
                if data["content_block"]["type"] == "tool_use" {
                    tools.push((data["content_block"]["name"].as_str().unwrap().to_string(), String::new()));
                }
            }
            "content_block_delta" if data["delta"]["type"] == "text_delta" => {
                text.push_str(data["delta"]["text"].as_str().unwrap())
            }
            "content_block_delta" if data["delta"]["type"] == "input_json_delta" => {
                tools.last_mut().unwrap().1.push_str(data["delta"]["partial_json"].as_str().unwrap())
            }
            "message_delta" => stop = data["delta"]["stop_reason"].as_str().unwrap().to_string(),
            _ => {}
        }
    }
    let stop = match stop.as_str() {
        "tool_use" => "tool_calls",
        "end_turn" => "stop",
        other => other,
    };
    Outcome {
        text,
        tools: tools.into_iter().map(|(n, a)| (n, serde_json::from_str(&a).unwrap())).collect(),
        stop: stop.to_string(),
    }
}

#[tokio::test]
async fn matrix_every_client_protocol_reaches_every_upstream_protocol_with_tools_streaming() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let openai_upstream = Outcome {
        text: String::new(),
        tools: vec![
            ("get_weather".into(), json!({"location": "Paris"})),
            ("get_time".into(), json!({"timezone": "Europe/Paris"})),
        ],
        stop: "tool_calls".into(),
    };
    let anthropic_upstream = Outcome {
        text: "Okay, let's check the weather.".into(),
        tools: vec![
            ("get_weather".into(), json!({"location": "San Francisco, CA", "unit": "fahrenheit"})),
            ("get_time".into(), json!({"timezone": "America/Los_Angeles"})),
        ],
        stop: "tool_calls".into(),
    };
    assert_eq!(via_openai(&gw, "gpt-tools").await, openai_upstream, "OpenAI client → OpenAI upstream");
    assert_eq!(via_anthropic(&gw, "gpt-tools").await, openai_upstream, "Anthropic client → OpenAI upstream");
    assert_eq!(via_openai(&gw, "claude-tools").await, anthropic_upstream, "OpenAI client → Anthropic upstream");
    assert_eq!(via_anthropic(&gw, "claude-tools").await, anthropic_upstream, "Anthropic client → Anthropic upstream");
    // The Ollama and Gemini fixtures call the same two tools.
    let ollama_upstream = Outcome {
        text: String::new(),
        tools: vec![
            ("get_weather".into(), json!({"location": "Paris"})),
            ("get_time".into(), json!({"timezone": "Europe/Paris"})),
        ],
        stop: "tool_calls".into(),
    };
    assert_eq!(via_openai(&gw, "llama-tools").await, ollama_upstream, "OpenAI client → Ollama upstream");
    assert_eq!(via_anthropic(&gw, "llama-tools").await, ollama_upstream, "Anthropic client → Ollama upstream");
    assert_eq!(via_openai(&gw, "gemini-tools").await, ollama_upstream, "OpenAI client → Gemini upstream");
    assert_eq!(via_anthropic(&gw, "gemini-tools").await, ollama_upstream, "Anthropic client → Gemini upstream");
}

#[tokio::test]
async fn a_cut_upstream_stream_ends_in_an_error_event_not_message_stop() {
    let mock = MockUpstream::start().await;
    let sources = format!(
        "sources:\n  - name: claude\n    base_url: {}\n    adapter: anthropic\n    models: [{{name: claude-cut}}]\n",
        mock.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    let events =
        anthropic_events(&post_messages(&gw, &anthropic_request("claude-cut", true)).await.text().await.unwrap());
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(data["type"], "error");
    assert!(data["error"]["message"].as_str().unwrap().contains("message_stop"), "{data}");
    assert!(events.iter().all(|(n, _)| n != "message_stop"));
    let text: String = events.iter().filter_map(|(_, d)| d["delta"]["text"].as_str()).collect();
    assert_eq!(text, "Hello!", "what arrived before the cut was delivered");
}

#[tokio::test]
async fn image_blocks_and_thinking_requests_translate_to_the_unified_form() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let request = json!({
        "model": "gpt", "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            {"type": "text", "text": "Describe both."}]}],
    });
    assert_eq!(post_messages(&gw, &request).await.status(), 200);
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(
        seen["messages"][0]["content"],
        json!([
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {"type": "text", "text": "Describe both."},
        ])
    );
    assert!(seen.get("thinking").is_none(), "the openai adapter drops Anthropic-only fields");
}

/// What Claude Code sends and the gateway used to refuse or drop: a system message between the
/// turns, adaptive thinking with an effort; and `count_tokens`, answered without an upstream.
#[tokio::test]
async fn claude_code_requests_keep_mid_conversation_system_messages_and_adaptive_thinking() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let mut body = anthropic_request("gpt", false);
    body["messages"]
        .as_array_mut()
        .unwrap()
        .insert(1, json!({"role": "system", "content": [{"type": "text", "text": "Be brief."}]}));
    body["thinking"] = json!({"type": "adaptive"});
    body["output_config"] = json!({"effort": "high"});
    let response = post_messages(&gw, &body).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(seen["messages"][0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(seen["messages"][2], json!({"role": "system", "content": "Be brief."}), "kept where it was said");
    assert!(seen.get("reasoning_effort").is_none(), "`fixture` is no reasoning model: no effort it would refuse");
    assert!(seen.get("disable_thinking").is_none(), "{seen}");

    body["thinking"] = json!({"type": "disabled"});
    assert_eq!(post_messages(&gw, &body).await.status(), 200);
    let seen = mock.state.requests().pop().unwrap().body;
    assert!(seen.get("reasoning_effort").is_none(), "thinking off asks for no effort: {seen}");

    let count = |body: Value| {
        let gw = &gw;
        async move {
            reqwest::Client::new()
                .post(format!("{}/v1/messages/count_tokens", gw.url))
                .header("x-api-key", KEY)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let calls_before = mock.state.requests().len();
    let short = count(json!({"model": "gpt", "messages": [{"role": "user", "content": "Hi"}]})).await;
    assert_eq!(short.status(), 200);
    assert_eq!(short.headers()["x-switchyard-estimate"], "true", "no Anthropic upstream serves gpt: an estimate");
    let short: Value = short.json().await.unwrap();
    let long: Value = count(json!({"model": "gpt", "messages": [{"role": "user", "content": "Hi ".repeat(400)}]}))
        .await
        .json()
        .await
        .unwrap();
    let (short, long) = (short["input_tokens"].as_u64().unwrap(), long["input_tokens"].as_u64().unwrap());
    assert!(short > 0 && long > short + 200, "{short} vs {long}");
    assert_eq!(mock.state.requests().len(), calls_before, "an estimate: nothing goes upstream");
    let unknown = count(json!({"model": "nosuch", "messages": [{"role": "user", "content": "Hi"}]})).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(unknown.json::<Value>().await.unwrap()["error"]["type"], "not_found_error");

    let other = reqwest::Client::new().post(format!("{}/v1/messages/batches", gw.url)).send().await.unwrap();
    assert_eq!(other.status(), 404);
    let other: Value = other.json().await.unwrap();
    assert_eq!((other["type"].as_str(), other["error"]["type"].as_str()), (Some("error"), Some("not_found_error")));
}
