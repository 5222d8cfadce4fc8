//! The legacy script contract's shapes and the unified (OpenAI) ones: a legacy response
//! `{content, finish_reason, reasoning_content, token_usage, tool_calls}` becomes a
//! `chat.completion`; a legacy chunk `{content, reasoning_content, done, finish_reason,
//! tool_call, tool_calls[{id, type, name, raw_arguments, stream_index}], usage}` becomes
//! `chat.completion.chunk`s. Pure functions over JSON.

use adapter_kit::unified::ChunkBuilder;
use serde_json::{Map, Value, json};

/// `token_usage` / `usage` in either naming (`prompt` or `prompt_tokens`...).
pub fn usage(value: &Value) -> Option<Value> {
    let obj = value.as_object()?;
    let pick = |short: &str, long: &str| obj.get(long).or_else(|| obj.get(short)).and_then(Value::as_u64);
    let prompt = pick("prompt", "prompt_tokens");
    let completion = pick("completion", "completion_tokens");
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    let total = pick("total", "total_tokens").or(match (prompt, completion) {
        (Some(p), Some(c)) => Some(p + c),
        _ => None,
    });
    Some(json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}))
}

/// A legacy unified response → `chat.completion` JSON.
pub fn response(legacy: &Value, id: &str, model: &str, created: u64) -> String {
    let calls: Vec<Value> = legacy["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "id": c["id"].as_str().map_or_else(|| format!("call_{i}"), str::to_string),
                "type": "function",
                "function": {"name": c["name"], "arguments": arguments_text(&c["arguments"])},
            })
        })
        .collect();
    let content = legacy["content"].as_str().filter(|s| !s.is_empty() || calls.is_empty());
    let mut message = json!({"role": "assistant", "content": content});
    if let Some(reasoning) = legacy["reasoning_content"].as_str().filter(|s| !s.is_empty()) {
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls.clone());
    }
    let finish = legacy["finish_reason"].as_str().map(str::to_string).unwrap_or_else(|| {
        if calls.is_empty() { "stop".into() } else { "tool_calls".into() }
    });
    let mut body = json!({
        "id": id, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
    });
    if let Some(u) = usage(&legacy["token_usage"]).or_else(|| usage(&legacy["usage"])) {
        body["usage"] = u;
    }
    body.to_string()
}

/// Arguments as the JSON text OpenAI carries (scripts may hand back a decoded table).
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(s) => s.clone(),
        Value::Null => "{}".into(),
        other => other.to_string(),
    }
}

/// Where one stream stands between chunks.
#[derive(Debug, Default)]
pub struct StreamState {
    pub chunks: ChunkBuilder,
    pub include_usage: bool,
    pub started: bool,
    pub done: bool,
    pub finished: bool,
    pub saw_tool_calls: bool,
}

/// A legacy chunk → unified chunks (role first, then content, tool calls, finish, usage).
pub fn chunk(legacy: &Value, st: &mut StreamState) -> Vec<String> {
    let mut out = Vec::new();
    let mut delta = Map::new();
    if !st.started {
        delta.insert("role".into(), json!("assistant"));
    }
    if let Some(text) = legacy["content"].as_str().filter(|s| !s.is_empty()) {
        delta.insert("content".into(), json!(text));
    }
    if let Some(text) = legacy["reasoning_content"].as_str().filter(|s| !s.is_empty()) {
        delta.insert("reasoning_content".into(), json!(text));
    }
    let mut calls: Vec<&Value> = legacy["tool_calls"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    if legacy["tool_call"].is_object() {
        calls.push(&legacy["tool_call"]);
    }
    let mut call_deltas = Vec::new();
    for (i, c) in calls.into_iter().enumerate() {
        // `stream_index` (not `index`) numbers the call; fragments without a name still count.
        let index = c["stream_index"].as_u64().or_else(|| c["index"].as_u64()).unwrap_or(i as u64);
        let mut call = json!({"index": index});
        if let Some(id) = c["id"].as_str().filter(|s| !s.is_empty()) {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        let mut function = Map::new();
        if let Some(name) = c["name"].as_str().filter(|s| !s.is_empty()) {
            function.insert("name".into(), json!(name));
        }
        let args = c.get("raw_arguments").or_else(|| c.get("arguments")).map(arguments_text).unwrap_or_default();
        function.insert("arguments".into(), json!(args));
        call["function"] = Value::Object(function);
        call_deltas.push(call);
    }
    if !call_deltas.is_empty() {
        st.saw_tool_calls = true;
        delta.insert("tool_calls".into(), Value::Array(call_deltas));
    }
    let done = legacy["done"].as_bool() == Some(true);
    let finish = legacy["finish_reason"].as_str().filter(|s| !s.is_empty()).map(str::to_string).or_else(|| {
        done.then(|| if st.saw_tool_calls { "tool_calls".to_string() } else { "stop".to_string() })
    });
    let has_delta = delta.keys().any(|k| k != "role");
    if has_delta || (finish.is_some() && !st.finished) {
        st.started = true;
        if has_delta {
            out.push(st.chunks.chunk(Value::Object(delta), None));
            delta = Map::new();
        }
        if let Some(reason) = finish.as_deref().filter(|_| !st.finished) {
            st.finished = true;
            out.push(st.chunks.chunk(Value::Object(delta), Some(reason)));
        }
    }
    if let Some(u) = usage(&legacy["usage"]).filter(|_| st.include_usage) {
        out.push(st.chunks.usage_chunk(u));
    }
    st.done |= done;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_response_becomes_a_chat_completion() {
        let legacy = json!({"content": "", "finish_reason": "tool_calls", "reasoning_content": "hmm",
            "token_usage": {"prompt": 9, "completion": 3, "total": 12},
            "tool_calls": [{"id": "c1", "type": "function", "name": "w", "arguments": "{\"a\":1}"}]});
        let body: Value = serde_json::from_str(&response(&legacy, "id1", "m", 7)).unwrap();
        assert_eq!(body["choices"][0]["message"]["content"], Value::Null);
        assert_eq!(body["choices"][0]["message"]["reasoning_content"], "hmm");
        assert_eq!(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(body["usage"], json!({"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}));
    }

    #[test]
    fn legacy_chunks_become_indexed_deltas_and_one_finish() {
        let mut st = StreamState { include_usage: true, ..Default::default() };
        let parse = |v: Vec<String>| v.iter().map(|c| serde_json::from_str::<Value>(c).unwrap()).collect::<Vec<_>>();
        let first = parse(chunk(&json!({"content": "Hi"}), &mut st));
        assert_eq!(first[0]["choices"][0]["delta"], json!({"role": "assistant", "content": "Hi"}));
        let call = parse(chunk(
            &json!({"tool_calls": [{"id": "c9", "name": "get", "raw_arguments": "{\"x\"", "stream_index": 1}]}),
            &mut st,
        ));
        assert_eq!(call[0]["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
        let fragment = parse(chunk(&json!({"tool_calls": [{"raw_arguments": ":2}", "stream_index": 1}]}), &mut st));
        assert_eq!(fragment[0]["choices"][0]["delta"]["tool_calls"][0], json!({"index": 1, "function": {"arguments": ":2}"}}));
        let end = parse(chunk(&json!({"done": true, "usage": {"prompt": 5, "completion": 7}}), &mut st));
        assert_eq!(end[0]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(end[1]["usage"]["total_tokens"], 12);
        assert!(st.done);
        assert!(chunk(&json!({"done": true}), &mut st).is_empty(), "one finish only");
    }
}
