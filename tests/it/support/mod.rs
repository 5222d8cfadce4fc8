//! Real parts for the integration tests: mock upstreams and a gateway harness.

pub mod binary;
pub mod faulty;
pub mod gateway;
pub mod mock;
pub mod redis;

pub use gateway::{KEY, TestGateway, chat_body, config_with, guest_wasm};
pub use mock::MockUpstream;

/// A `sources:` block with one source `mock` (openai adapter) serving the given upstream models,
/// whole answers asked as sent (the mock's JSON and SSE fixtures say different things; whole
/// answers put together from streams, the default, are tests/it/whole_answers.rs).
pub fn mock_source(mock: &MockUpstream, models: &[&str]) -> String {
    let mut out = format!(
        "sources:\n  - name: mock\n    base_url: {}\n    api_key: sk-upstream-secret-0123456789\n    idle_timeout_seconds: 0.5\n    stream_whole_answers: false\n    models:\n",
        mock.url
    );
    for m in models {
        out.push_str(&format!("      - name: {m}\n"));
    }
    out
}

/// Reads an SSE body to its end as text.
pub async fn body_text(response: reqwest::Response) -> String {
    response.text().await.unwrap()
}

/// An OpenAI-style SSE body as its JSON events, and whether it ended with `[DONE]`.
pub fn openai_events(body: &str) -> (Vec<serde_json::Value>, bool) {
    let mut done = false;
    let mut events = Vec::new();
    for event in body.split_terminator("\n\n") {
        let data = event.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data line: {event:?}"));
        if data == "[DONE]" {
            done = true;
        } else {
            events.push(serde_json::from_str(data).unwrap());
        }
    }
    (events, done)
}

/// An Anthropic-style SSE body as (event name, data) pairs.
pub fn anthropic_events(body: &str) -> Vec<(String, serde_json::Value)> {
    body.split_terminator("\n\n")
        .map(|event| {
            let (name, data) = event.split_once('\n').unwrap_or_else(|| panic!("not an SSE event: {event:?}"));
            let name = name.strip_prefix("event: ").expect("event line").to_string();
            (name, serde_json::from_str(data.strip_prefix("data: ").expect("data line")).unwrap())
        })
        .collect()
}

/// What a unified stream adds up to: text, reasoning, tool calls by index, finish, usage.
#[derive(Debug, Default)]
pub struct Assembled {
    pub content: String,
    pub reasoning: String,
    /// (id, name, arguments) by tool-call index.
    pub tool_calls: Vec<(String, String, String)>,
    pub finish: Option<String>,
    pub usage: Option<serde_json::Value>,
}

pub fn assemble(chunks: &[serde_json::Value]) -> Assembled {
    let mut out = Assembled::default();
    for chunk in chunks {
        if chunk["usage"].is_object() {
            out.usage = Some(chunk["usage"].clone());
        }
        let Some(choice) = chunk["choices"].get(0) else { continue };
        let delta = &choice["delta"];
        out.content.push_str(delta["content"].as_str().unwrap_or_default());
        out.reasoning.push_str(delta["reasoning_content"].as_str().unwrap_or_default());
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().expect("tool-call deltas carry an index") as usize;
            if out.tool_calls.len() <= index {
                out.tool_calls.resize(index + 1, Default::default());
            }
            let slot = &mut out.tool_calls[index];
            if let Some(id) = call["id"].as_str() {
                slot.0 = id.to_string();
            }
            if let Some(name) = call["function"]["name"].as_str() {
                slot.1 = name.to_string();
            }
            slot.2.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            out.finish = Some(f.to_string());
        }
    }
    out
}
