//! A whole chat answer put together from its stream: what a client that did not ask to stream
//! gets when the gateway streamed from the upstream (so silence is bounded by the stream's
//! first-byte and idle timeouts). Every input is an upstream's: bounded in size and calls.

use serde_json::{Map, Value, json};

/// Choices one answer may carry (the books allow as many).
const MAX_CHOICES: usize = 128;
/// Tool calls one choice may carry (the books count as many).
const MAX_TOOL_CALLS: usize = 128;

/// What one choice accumulated.
#[derive(Default)]
struct Choice {
    index: u64,
    content: Option<String>,
    reasoning: Option<String>,
    signature: Option<String>,
    refusal: Option<String>,
    /// (unified index, id, name, arguments)
    calls: Vec<(u64, Option<String>, Option<String>, String)>,
    finish_reason: Value,
}

/// Puts the whole `chat.completion` together from its `chat.completion.chunk`s (unified
/// chunks, or an OpenAI-compatible upstream's own, which are the same shape): text, reasoning
/// and tool-call fragments joined, the last finish reason and usage kept.
#[derive(Default)]
pub struct Assembler {
    head: Map<String, Value>,
    choices: Vec<Choice>,
    usage: Option<Value>,
    /// Bytes of text, reasoning and arguments held.
    held: usize,
}

/// Appends `piece`; says how many bytes that added.
fn append(to: &mut Option<String>, piece: Option<&str>) -> usize {
    let Some(piece) = piece else { return 0 };
    to.get_or_insert_with(String::new).push_str(piece);
    piece.len()
}

impl Assembler {
    /// One chunk's JSON; what is not a chunk is passed over.
    pub fn chunk(&mut self, json: &str) {
        let Ok(Value::Object(chunk)) = serde_json::from_str::<Value>(json) else { return };
        for field in ["id", "created", "model", "system_fingerprint", "service_tier"] {
            if let Some(value) = chunk.get(field).filter(|v| !v.is_null())
                && !self.head.contains_key(field)
            {
                self.head.insert(field.to_string(), value.clone());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            let at = match self.choices.iter().position(|c| c.index == index) {
                Some(at) => at,
                None if self.choices.len() >= MAX_CHOICES => continue,
                None => {
                    self.choices.push(Choice { index, finish_reason: Value::Null, ..Choice::default() });
                    self.choices.len() - 1
                }
            };
            let into = &mut self.choices[at];
            if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
                into.finish_reason = reason.clone();
            }
            let Some(delta) = choice.get("delta") else { continue };
            let text = |field: &str| delta.get(field).and_then(Value::as_str);
            self.held += append(&mut into.content, text("content"));
            self.held += append(&mut into.reasoning, text("reasoning_content"));
            // A signature belongs to the thinking it closes: the last one stands.
            if let Some(signature) = text("reasoning_signature") {
                into.signature = Some(signature.to_string());
            }
            self.held += append(&mut into.refusal, text("refusal"));
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let call_index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let at = match into.calls.iter().position(|c| c.0 == call_index) {
                    Some(at) => at,
                    None if into.calls.len() >= MAX_TOOL_CALLS => continue,
                    None => {
                        into.calls.push((call_index, None, None, String::new()));
                        into.calls.len() - 1
                    }
                };
                let held = &mut into.calls[at];
                let function = call.get("function");
                let name = function.and_then(|f| f.get("name")).and_then(Value::as_str).filter(|n| !n.is_empty());
                if held.1.is_none() {
                    held.1 = call.get("id").and_then(Value::as_str).filter(|i| !i.is_empty()).map(str::to_string);
                }
                if held.2.is_none() {
                    held.2 = name.map(str::to_string);
                }
                if let Some(fragment) = function.and_then(|f| f.get("arguments")).and_then(Value::as_str) {
                    held.3.push_str(fragment);
                    self.held += fragment.len();
                }
            }
        }
    }

    /// Bytes of text, reasoning and tool-call arguments put together so far.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Whether the stream said everything a whole answer needs: at least one choice, each with
    /// its finish reason (a stream that ended without them was cut, not finished).
    pub fn is_whole(&self) -> bool {
        !self.choices.is_empty() && self.choices.iter().all(|c| !c.finish_reason.is_null())
    }

    /// The whole answer, in the shape (and field order) of a non-streamed `chat.completion`.
    pub fn finish(mut self) -> String {
        let mut out = Map::new();
        for field in ["id", "object", "created", "model", "system_fingerprint"] {
            match (field, self.head.remove(field)) {
                ("object", _) => {
                    out.insert(field.into(), json!("chat.completion"));
                }
                (_, Some(value)) => {
                    out.insert(field.into(), value);
                }
                (_, None) => {}
            }
        }
        self.choices.sort_by_key(|c| c.index);
        let choices: Vec<Value> = self.choices.into_iter().map(choice_json).collect();
        out.insert("choices".into(), Value::Array(choices));
        if let Some(usage) = self.usage {
            out.insert("usage".into(), usage);
        }
        out.extend(self.head);
        Value::Object(out).to_string()
    }
}

/// The chunks a stream of `whole` (a unified `chat.completion`) would have carried, in the
/// order a live one sends them: each choice's reasoning, then its text (and refusal), its tool
/// calls and its finish reason; the usage last. [`Assembler`] puts them back together as
/// `whole`. `None` when `whole` is not a completion.
pub fn as_chunks(whole: &str) -> Option<Vec<String>> {
    let Ok(Value::Object(response)) = serde_json::from_str::<Value>(whole) else { return None };
    let choices = response.get("choices")?.as_array()?;
    let mut head = Map::new();
    for field in ["id", "created", "model", "system_fingerprint"] {
        if let Some(value) = response.get(field) {
            head.insert(field.into(), value.clone());
        }
    }
    head.insert("object".into(), json!("chat.completion.chunk"));
    let chunk = |choices: Value, usage: Option<&Value>| {
        let mut chunk = head.clone();
        chunk.insert("choices".into(), choices);
        if let Some(usage) = usage {
            chunk.insert("usage".into(), usage.clone());
        }
        Value::Object(chunk).to_string()
    };
    let mut chunks = Vec::new();
    for choice in choices {
        let index = choice.get("index").cloned().unwrap_or(json!(0));
        let message = choice.get("message").and_then(Value::as_object).cloned().unwrap_or_default();
        let delta = |fields: Map<String, Value>| json!([{"index": index, "delta": fields, "finish_reason": null}]);
        let mut thinking = Map::new();
        for field in ["reasoning_content", "reasoning_signature"] {
            if let Some(value) = message.get(field).filter(|v| v.is_string()) {
                thinking.insert(field.into(), value.clone());
            }
        }
        if !thinking.is_empty() {
            chunks.push(chunk(delta(thinking), None));
        }
        let mut said = Map::new();
        said.insert("role".into(), json!("assistant"));
        if let Some(content) = message.get("content").filter(|c| c.is_string()) {
            said.insert("content".into(), content.clone());
        }
        if let Some(refusal) = message.get("refusal").filter(|r| r.is_string()) {
            said.insert("refusal".into(), refusal.clone());
        }
        chunks.push(chunk(delta(said), None));
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty()) {
            let indexed: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, call)| {
                    let mut call = call.as_object().cloned().unwrap_or_default();
                    call.insert("index".into(), json!(i));
                    Value::Object(call)
                })
                .collect();
            let mut fields = Map::new();
            fields.insert("tool_calls".into(), Value::Array(indexed));
            chunks.push(chunk(delta(fields), None));
        }
        let finish = choice.get("finish_reason").cloned().unwrap_or(json!("stop"));
        chunks.push(chunk(json!([{"index": index, "delta": {}, "finish_reason": finish}]), None));
    }
    if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
        chunks.push(chunk(json!([]), Some(usage)));
    }
    Some(chunks)
}

fn choice_json(choice: Choice) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    // As a whole answer has it: no text (a call only) is `null`, not "".
    let content = choice.content.filter(|c| !c.is_empty() || choice.calls.is_empty());
    message.insert("content".into(), content.map_or(Value::Null, Value::String));
    if let Some(reasoning) = choice.reasoning {
        message.insert("reasoning_content".into(), json!(reasoning));
    }
    if let Some(signature) = choice.signature {
        message.insert("reasoning_signature".into(), json!(signature));
    }
    if let Some(refusal) = choice.refusal {
        message.insert("refusal".into(), json!(refusal));
    }
    if !choice.calls.is_empty() {
        let calls: Vec<Value> = choice
            .calls
            .into_iter()
            .map(|(_, id, name, arguments)| {
                // A call without arguments streams none; whole, it has an empty object.
                let arguments = if arguments.is_empty() { "{}".to_string() } else { arguments };
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    json!({"index": choice.index, "message": message, "logprobs": null, "finish_reason": choice.finish_reason})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assembled(chunks: &[Value]) -> Value {
        let mut assembler = Assembler::default();
        for chunk in chunks {
            assembler.chunk(&chunk.to_string());
        }
        serde_json::from_str(&assembler.finish()).unwrap()
    }

    #[test]
    fn text_reasoning_and_tool_calls_join_into_one_message_with_the_usage() {
        let head = |delta: Value, finish: Value| {
            json!({"id": "c1", "object": "chat.completion.chunk", "created": 7, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let whole = assembled(&[
            head(json!({"role": "assistant", "content": "", "reasoning_content": "think"}), Value::Null),
            head(json!({"content": "Hel", "reasoning_content": "ing"}), Value::Null),
            head(json!({"content": "lo"}), Value::Null),
            head(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\""}}]}),
                Value::Null,
            ),
            head(json!({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}), json!("tool_calls")),
            json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}}),
            json!("[DONE]"),
        ]);
        assert_eq!(
            whole,
            json!({"id": "c1", "object": "chat.completion", "created": 7, "model": "m", "choices": [{"index": 0,
                "message": {"role": "assistant", "content": "Hello", "reasoning_content": "thinking",
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                "logprobs": null, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}})
        );
    }

    #[test]
    fn a_stream_without_finish_reasons_is_not_whole_and_argumentless_calls_get_an_object() {
        let mut assembler = Assembler::default();
        assert!(!assembler.is_whole(), "nothing came");
        assembler.chunk(r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#);
        assert!(!assembler.is_whole(), "cut before its finish reason");
        assembler.chunk(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"now"}}],"reasoning_signature":"a"},"finish_reason":"tool_calls"}]}"#);
        assembler.chunk(r#"{"choices":[{"index":0,"delta":{"reasoning_signature":"b"}}]}"#);
        assert!(assembler.is_whole());
        let whole: Value = serde_json::from_str(&assembler.finish()).unwrap();
        let message = &whole["choices"][0]["message"];
        assert_eq!(message["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(message["reasoning_signature"], "b", "the last signature, not both");
    }

    #[test]
    fn a_whole_answer_replays_as_chunks_that_add_up_to_it() {
        let whole = json!({"id": "c1", "object": "chat.completion", "created": 7, "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hello", "reasoning_content": "thinking",
                "reasoning_signature": "sig",
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
             "logprobs": null, "finish_reason": "tool_calls"},
            {"index": 1, "message": {"role": "assistant", "content": "Hi", "refusal": "no"}, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}});
        let chunks = as_chunks(&whole.to_string()).unwrap();
        // The books count the first choice's replay as they count the answer.
        let mut first = whole.clone();
        first["choices"].as_array_mut().unwrap().truncate(1);
        let mut tally = crate::provider::Tally::default();
        for chunk in as_chunks(&first.to_string()).unwrap() {
            tally.add_chunk(&chunk);
        }
        assert_eq!(tally, crate::provider::Tally::of_response(&first.to_string()));
        let chunks: Vec<Value> = chunks.iter().map(|c| serde_json::from_str(c).unwrap()).collect();
        assert_eq!(assembled(&chunks), whole);
        assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == "c1"));
        assert_eq!(as_chunks("[]"), None);
        assert_eq!(as_chunks(r#"{"error":{}}"#), None);
    }

    #[test]
    fn hostile_indexes_are_capped_not_allocated() {
        let calls: Vec<Value> = (0..1000u64)
            .map(|i| json!({"index": i.wrapping_mul(0x9E37_79B9_7F4A_7C15), "id": "x", "function": {"name": "f", "arguments": "{}"}}))
            .collect();
        let choices: Vec<Value> =
            (0..1000u64).map(|i| json!({"index": u64::MAX - i, "delta": {"content": "x"}})).collect();
        let whole = assembled(&[
            json!({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}),
            json!({"choices": choices}),
        ]);
        let choices = whole["choices"].as_array().unwrap();
        assert_eq!(choices.len(), MAX_CHOICES);
        assert!(choices.windows(2).all(|w| w[0]["index"].as_u64() < w[1]["index"].as_u64()), "by index");
        assert_eq!(choices[0]["message"]["tool_calls"].as_array().unwrap().len(), MAX_TOOL_CALLS);
    }
}
