//! Unified answers → OpenAI Responses: a `response` object with output items (reasoning,
//! message, function calls), or its SSE events in order, each with a rising
//! `sequence_number`, ending in exactly one of `response.completed`, `.incomplete`, `.failed`.

use serde_json::{Map, Value, json};
use switchyard_unified::{Reply, UsageJson};

/// What the response echoes of the request (the SDK's types expect these fields).
#[derive(Debug, Clone, Default)]
pub struct Echo {
    pub model: String,
    pub request: Map<String, Value>,
    pub created_at: u64,
    pub id: String,
    pub previous_response_id: Option<String>,
    /// Whether the gateway keeps the response (`store`, true unless the client said false).
    pub store: bool,
    /// The request's namespaced functions: a chat upstream called them by flat names.
    pub namespaces: super::request::Namespaces,
}

/// Unified usage → Responses usage (`null` counts stay 0: the field is required there).
fn usage(unified: Option<&UsageJson>) -> Value {
    let u = unified.cloned().unwrap_or_default();
    let (input, output) = (u.prompt_tokens.unwrap_or(0), u.completion_tokens.unwrap_or(0));
    let details = u.prompt_tokens_details.unwrap_or_default();
    let (cached, written) = (details.cached_tokens.unwrap_or(0), details.cache_creation_tokens.unwrap_or(0));
    let reasoning = u.completion_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0);
    // Every field the SDKs' typed `ResponseUsage` requires (openai-python ≥ 2.45 requires
    // `cache_write_tokens`).
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input.saturating_add(output),
    })
}

/// A failed response's `error`: its `code` one the Responses API defines (the SDKs' typed
/// `ResponseError` takes no other), the gateway's own code leading the message.
fn failure(code: &str, message: &str) -> Value {
    let api_code = match code {
        "server_error" | "rate_limit_exceeded" => return json!({"code": code, "message": message}),
        "rate_limited" | "insufficient_quota" | "rate_limit_error" | "key_quota_exceeded" => "rate_limit_exceeded",
        _ => "server_error",
    };
    json!({"code": api_code, "message": format!("{code}: {message}")})
}

/// `completed`, or `incomplete` with its reason, from the unified finish reason.
fn status(finish: Option<&str>) -> (&'static str, Value) {
    match finish {
        Some("length") => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some("content_filter") => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

/// The `response` object around `output`.
fn response(echo: &Echo, status: &str, output: Vec<Value>, usage: Value, incomplete: Value, error: Value) -> Value {
    let r = &echo.request;
    let get = |field: &str, default: Value| r.get(field).filter(|v| !v.is_null()).cloned().unwrap_or(default);
    json!({
        "id": echo.id, "object": "response", "created_at": echo.created_at, "status": status,
        "error": error, "incomplete_details": incomplete,
        "instructions": get("instructions", Value::Null), "max_output_tokens": get("max_output_tokens", Value::Null),
        "model": echo.model, "output": output, "parallel_tool_calls": get("parallel_tool_calls", json!(true)),
        "previous_response_id": echo.previous_response_id, "reasoning": {"effort": r.get("reasoning").and_then(|x| x.get("effort")).cloned().unwrap_or(Value::Null), "summary": null},
        "store": echo.store, "temperature": get("temperature", json!(1.0)), "text": get("text", json!({"format": {"type": "text"}})),
        "tool_choice": get("tool_choice", json!("auto")), "tools": get("tools", json!([])), "top_p": get("top_p", json!(1.0)),
        "truncation": "disabled", "usage": usage, "metadata": get("metadata", json!({})),
    })
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"type": "message", "id": id, "status": status, "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn reasoning_item(id: &str, summary: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": summary}]})
}

fn call_item(echo: &Echo, id: &str, call: &Call, status: &str) -> Value {
    let mut item = json!({"type": "function_call", "id": id, "call_id": call.call_id, "name": call.name,
                          "arguments": call.arguments, "status": status});
    if let Some((namespace, name)) = echo.namespaces.split(&call.name) {
        item["name"] = json!(name);
        item["namespace"] = json!(namespace);
    }
    item
}

/// A complete unified `chat.completion` as a `response`.
pub fn response_object(echo: &Echo, unified: &Reply) -> Value {
    let choice = unified.choices.first();
    let mut output = Vec::new();
    if let Some(message) = choice.and_then(|c| c.message.as_ref()) {
        if let Some(reasoning) = message.reasoning().filter(|t| !t.is_empty()) {
            output.push(reasoning_item(&format!("rs_{}", echo.id), reasoning));
        }
        if let Some(text) = message.text().filter(|t| !t.is_empty()) {
            output.push(message_item(&format!("msg_{}", echo.id), text, "completed"));
        }
        for (i, call) in message.tool_calls.iter().enumerate() {
            let call = Call {
                call_id: call.id.clone().unwrap_or_default(),
                name: call.function.name.clone().unwrap_or_default(),
                arguments: call.function.arguments.clone().unwrap_or_else(|| "{}".into()),
            };
            output.push(call_item(echo, &format!("fc_{}_{i}", echo.id), &call, "completed"));
        }
    }
    let (status, incomplete) = status(choice.and_then(|c| c.finish_reason.as_ref()).and_then(Value::as_str));
    response(echo, status, output, usage(unified.usage.as_ref()), incomplete, Value::Null)
}

pub fn sse(data: &Value) -> String {
    format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or("message"))
}

#[derive(Debug, Clone, Default)]
struct Call {
    call_id: String,
    name: String,
    arguments: String,
}

/// Function calls one streamed answer may carry (as the books count them).
const MAX_CALLS: usize = 128;

/// The output item being written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Open {
    Reasoning,
    Message,
    /// A function call, by its unified tool-call index.
    Call(u64),
}

/// Turns unified chunks into Responses events: `start`, `chunk` per chunk, then exactly one
/// of `finish` or `fail`.
pub struct StreamEncoder {
    echo: Echo,
    sequence: u64,
    open: Option<(Open, usize)>,
    /// Output items done so far, in order.
    done: Vec<Value>,
    text: String,
    reasoning: String,
    /// Function calls by their unified index, at most [`MAX_CALLS`]; true once closed.
    calls: Vec<(u64, Call, bool)>,
    finish: Option<String>,
    usage: Option<UsageJson>,
}

impl StreamEncoder {
    pub fn new(echo: Echo) -> StreamEncoder {
        StreamEncoder {
            echo,
            sequence: 0,
            open: None,
            done: Vec::new(),
            text: String::new(),
            reasoning: String::new(),
            calls: Vec::new(),
            finish: None,
            usage: None,
        }
    }

    fn event(&mut self, mut data: Value, out: &mut String) {
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        out.push_str(&sse(&data));
    }

    fn snapshot(&self, status: &str) -> Value {
        response(&self.echo, status, self.done.clone(), Value::Null, Value::Null, Value::Null)
    }

    /// `response.created` and `response.in_progress`.
    pub fn start(&mut self, out: &mut String) {
        let created = json!({"type": "response.created", "response": self.snapshot("in_progress")});
        self.event(created, out);
        let progress = json!({"type": "response.in_progress", "response": self.snapshot("in_progress")});
        self.event(progress, out);
    }

    pub fn chunk(&mut self, chunk: Reply, out: &mut String) {
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let Some(choice) = chunk.choices.into_iter().next() else { return };
        if let Some(finish) = choice.finish_reason.as_ref().and_then(Value::as_str) {
            self.finish = Some(finish.to_string());
        }
        let Some(delta) = choice.delta else { return };
        if let Some(text) = delta.reasoning().filter(|t| !t.is_empty()) {
            let (id, index) = self.ensure(Open::Reasoning, out);
            self.reasoning.push_str(text);
            self.event(json!({"type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": index, "summary_index": 0, "delta": text}), out);
        }
        if let Some(text) = delta.text().filter(|t| !t.is_empty()) {
            let (id, index) = self.ensure(Open::Message, out);
            self.text.push_str(text);
            self.event(json!({"type": "response.output_text.delta", "item_id": id, "output_index": index, "content_index": 0, "delta": text, "logprobs": []}), out);
        }
        for call in delta.tool_calls {
            let tool = call.index.unwrap_or(0);
            // An upstream's calls come one after another: an index that comes back after its
            // item closed, or one past the cap, is left out (re-sending a closed call, or
            // keeping any number of them, would let one upstream grow the answer without bound).
            match self.calls.iter().position(|(i, _, _)| *i == tool) {
                Some(at) if self.calls[at].2 => continue,
                Some(_) => {}
                None if self.calls.len() >= MAX_CALLS => continue,
                None => {
                    let fresh = Call {
                        call_id: call.id.unwrap_or_default(),
                        name: call.function.name.unwrap_or_default(),
                        arguments: String::new(),
                    };
                    self.calls.push((tool, fresh, false));
                }
            }
            let (id, index) = self.ensure(Open::Call(tool), out);
            if let Some(fragment) = call.function.arguments.as_deref().filter(|f| !f.is_empty()) {
                if let Some((_, c, _)) = self.calls.iter_mut().find(|(i, _, _)| *i == tool) {
                    c.arguments.push_str(fragment);
                }
                self.event(json!({"type": "response.function_call_arguments.delta", "item_id": id, "output_index": index, "delta": fragment}), out);
            }
        }
    }

    /// After a complete unified stream: the last item closed, then `response.completed` (or
    /// `response.incomplete` when the answer was cut by its token limit or a filter).
    /// Returns the final `response` object.
    pub fn finish(&mut self, out: &mut String) -> Value {
        self.close(out);
        let (status, incomplete) = status(self.finish.as_deref());
        let response =
            response(&self.echo, status, self.done.clone(), usage(self.usage.as_ref()), incomplete, Value::Null);
        let kind = if status == "completed" { "response.completed" } else { "response.incomplete" };
        self.event(json!({"type": kind, "response": response.clone()}), out);
        response
    }

    /// After a failed stream: `response.failed` with the error; what was written stays written.
    pub fn fail(&mut self, code: &str, message: &str, out: &mut String) {
        let error = failure(code, message);
        let response =
            response(&self.echo, "failed", self.done.clone(), usage(self.usage.as_ref()), Value::Null, error);
        self.event(json!({"type": "response.failed", "response": response}), out);
    }

    fn item_id(&self, open: &Open) -> String {
        match open {
            Open::Reasoning => format!("rs_{}", self.echo.id),
            Open::Message => format!("msg_{}", self.echo.id),
            Open::Call(i) => format!("fc_{}_{i}", self.echo.id),
        }
    }

    /// (item id, output index) of `item`, opening it (and closing the one before) when new.
    fn ensure(&mut self, item: Open, out: &mut String) -> (String, usize) {
        if let Some((open, index)) = &self.open
            && *open == item
        {
            return (self.item_id(open), *index);
        }
        self.close(out);
        let index = self.done.len();
        let id = self.item_id(&item);
        let added = match &item {
            Open::Reasoning => json!({"type": "reasoning", "id": id, "summary": []}),
            Open::Message => {
                json!({"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []})
            }
            Open::Call(i) => {
                let call = self.calls.iter().find(|(n, _, _)| n == i).map(|(_, c, _)| c.clone()).unwrap_or_default();
                call_item(&self.echo, &id, &call, "in_progress")
            }
        };
        self.event(json!({"type": "response.output_item.added", "output_index": index, "item": added}), out);
        match &item {
            Open::Reasoning => self.event(json!({"type": "response.reasoning_summary_part.added", "item_id": id, "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}), out),
            Open::Message => self.event(json!({"type": "response.content_part.added", "item_id": id, "output_index": index, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}), out),
            Open::Call(_) => {}
        }
        self.open = Some((item, index));
        (id, index)
    }

    fn close(&mut self, out: &mut String) {
        let Some((item, index)) = self.open.take() else { return };
        let id = self.item_id(&item);
        let done = match item {
            Open::Reasoning => {
                let text = std::mem::take(&mut self.reasoning);
                self.event(json!({"type": "response.reasoning_summary_text.done", "item_id": id, "output_index": index, "summary_index": 0, "text": text}), out);
                self.event(json!({"type": "response.reasoning_summary_part.done", "item_id": id, "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": text}}), out);
                reasoning_item(&id, &text)
            }
            Open::Message => {
                let text = std::mem::take(&mut self.text);
                self.event(json!({"type": "response.output_text.done", "item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}), out);
                self.event(json!({"type": "response.content_part.done", "item_id": id, "output_index": index, "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}}), out);
                message_item(&id, &text, "completed")
            }
            Open::Call(i) => {
                let at = self.calls.iter().position(|(n, _, _)| *n == i);
                let call = at.map(|at| {
                    self.calls[at].2 = true;
                    // Closed for good: its arguments are not kept twice.
                    std::mem::take(&mut self.calls[at].1)
                });
                let call = call.unwrap_or_default();
                self.event(json!({"type": "response.function_call_arguments.done", "item_id": id, "output_index": index, "arguments": call.arguments}), out);
                call_item(&self.echo, &id, &call, "completed")
            }
        };
        self.event(json!({"type": "response.output_item.done", "output_index": index, "item": done.clone()}), out);
        self.done.push(done);
    }
}

/// Follows a Responses upstream's own events as they pass: the last sequence number and the
/// response id, so a failure the gateway reports continues the numbering.
pub struct NativeTracker {
    echo: Echo,
    next_sequence: u64,
}

impl NativeTracker {
    pub fn new(echo: Echo) -> NativeTracker {
        NativeTracker { echo, next_sequence: 0 }
    }

    /// Reads one passed-on frame; the final `response` object when it is the completion.
    pub fn observe(&mut self, frame: &str) -> Option<Value> {
        let data: String = frame.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
        let event: Value = serde_json::from_str(&data).ok()?;
        if let Some(n) = event["sequence_number"].as_u64() {
            self.next_sequence = self.next_sequence.max(n.saturating_add(1));
        }
        match event["type"].as_str() {
            Some("response.created") => {
                if let Some(id) = event["response"]["id"].as_str() {
                    self.echo.id = id.to_string();
                }
                None
            }
            Some("response.completed" | "response.incomplete") => Some(event["response"].clone()),
            _ => None,
        }
    }

    /// The terminal `response.failed` event, numbered after the last one passed on.
    pub fn fail(&mut self, code: &str, message: &str) -> String {
        let error = failure(code, message);
        let response = response(&self.echo, "failed", Vec::new(), Value::Null, Value::Null, error);
        let event = json!({"type": "response.failed", "sequence_number": self.next_sequence, "response": response});
        self.next_sequence += 1;
        sse(&event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(out: &str) -> Vec<Value> {
        out.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(name.strip_prefix("event: ").unwrap(), data["type"], "event name = type");
                data
            })
            .collect()
    }

    fn echo() -> Echo {
        Echo { model: "m".into(), id: "resp_1".into(), created_at: 1, ..Echo::default() }
    }

    #[test]
    fn a_stream_with_text_then_two_calls_closes_each_item_and_numbers_every_event() {
        let mut encoder = StreamEncoder::new(echo());
        let mut out = String::new();
        encoder.start(&mut out);
        let chunks = [
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me "}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "look."}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "ls", "arguments": "{\"p\""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "pwd", "arguments": "{}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}}}),
        ];
        for chunk in chunks {
            encoder.chunk(serde_json::from_value(chunk).unwrap(), &mut out);
        }
        encoder.finish(&mut out);
        let events = events(&out);
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event["sequence_number"], i as u64);
        }
        let done = &events.last().unwrap()["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][0]["content"][0]["text"], "Let me look.");
        assert_eq!(
            (done["output"][1]["call_id"].as_str(), done["output"][1]["arguments"].as_str()),
            (Some("call_a"), Some("{\"p\":1}"))
        );
        assert_eq!(done["output"][2]["name"], "pwd");
        assert_eq!(
            done["usage"],
            json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0}, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15})
        );
    }

    #[test]
    fn a_cut_stream_ends_failed_and_a_length_stop_incomplete() {
        let mut encoder = StreamEncoder::new(echo());
        let mut out = String::new();
        encoder.start(&mut out);
        let hal = json!({"choices": [{"index": 0, "delta": {"content": "Hal"}}]});
        encoder.chunk(serde_json::from_value(hal).unwrap(), &mut out);
        encoder.fail("stream_truncated", "the upstream stream ended early", &mut out);
        let last = events(&out).pop().unwrap();
        let mut tracker = NativeTracker::new(echo());
        let created = sse(&json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_up"}}));
        assert_eq!(tracker.observe(&created), None);
        let failed = events(&tracker.fail("stream_truncated", "cut"));
        assert_eq!(
            (failed[0]["sequence_number"].as_u64(), failed[0]["response"]["id"].as_str()),
            (Some(1), Some("resp_up"))
        );
        assert_eq!(
            (last["type"].as_str(), last["response"]["status"].as_str()),
            (Some("response.failed"), Some("failed"))
        );
        assert_eq!(last["response"]["error"]["code"], "server_error");
        assert!(last["response"]["error"]["message"].as_str().unwrap().starts_with("stream_truncated: "));

        let unified = json!({"choices": [{"message": {"content": "Hal", "reasoning_content": "hmm"}, "finish_reason": "length"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}});
        let object = response_object(&echo(), &serde_json::from_value(unified).unwrap());
        assert_eq!(
            (object["status"].as_str(), object["incomplete_details"]["reason"].as_str()),
            (Some("incomplete"), Some("max_output_tokens"))
        );
        assert_eq!(object["output"][0]["type"], "reasoning");
        assert_eq!(object["output"][1]["content"][0]["text"], "Hal");
    }
}
