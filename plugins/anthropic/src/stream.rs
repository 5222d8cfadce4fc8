//! Anthropic SSE → unified chunks. Tool calls get OpenAI indexes by their order among tool
//! calls (not Anthropic's block index, which counts text and thinking blocks too).

use std::collections::HashMap;

use adapter_kit::errors::{adapter_error, classify};
use adapter_kit::unified::{ChunkBuilder, Usage};
use adapter_kit::{AdapterError, ErrorKind, StreamEvent, StreamOutput, host};
use serde_json::{Value, json};

use super::{finish_reason, usage_of};

#[derive(Default)]
pub struct StreamState {
    pub include_usage: bool,
    pub done: bool,
    chunks: ChunkBuilder,
    /// Anthropic block index → the OpenAI tool-call index of a tool_use block.
    tool_index: HashMap<u64, usize>,
    tool_calls: usize,
    usage: Usage,
}

impl StreamState {
    pub fn event(&mut self, event: &StreamEvent, model: &str) -> Result<StreamOutput, AdapterError> {
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| adapter_error(ErrorKind::InvalidResponse, &format!("stream event is not JSON: {e}")))?;
        let kind = data.get("type").and_then(Value::as_str).unwrap_or(event.event.as_str());
        let mut chunks = Vec::new();
        match kind {
            "message_start" => {
                let message = &data["message"];
                self.chunks = ChunkBuilder {
                    id: message["id"].as_str().unwrap_or_default().to_string(),
                    model: message["model"].as_str().unwrap_or(model).to_string(),
                    created: host::now_unix_ms() / 1000,
                };
                self.usage = usage_of(&message["usage"]);
                chunks.push(self.chunks.chunk(json!({"role": "assistant", "content": ""}), None));
            }
            "content_block_start" => {
                let block = &data["content_block"];
                if block["type"] == "tool_use" {
                    let index = self.tool_calls;
                    self.tool_calls += 1;
                    self.tool_index.insert(data["index"].as_u64().unwrap_or(0), index);
                    chunks.push(self.chunks.chunk(
                        json!({"tool_calls": [{"index": index, "id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": ""}}]}),
                        None,
                    ));
                }
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => chunks.push(self.chunks.chunk(json!({"content": delta["text"]}), None)),
                    Some("thinking_delta") => {
                        chunks.push(self.chunks.chunk(json!({"reasoning_content": delta["thinking"]}), None))
                    }
                    Some("input_json_delta") => {
                        let fragment = delta["partial_json"].as_str().unwrap_or_default();
                        let Some(index) = self.tool_index.get(&data["index"].as_u64().unwrap_or(0)) else {
                            return Err(adapter_error(
                                ErrorKind::InvalidResponse,
                                "input_json_delta for a block that is not a tool_use",
                            ));
                        };
                        if !fragment.is_empty() {
                            chunks.push(self.chunks.chunk(
                                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                                None,
                            ));
                        }
                    }
                    // The thinking's signature, opaque: a client sends it back with the thinking.
                    Some("signature_delta") => {
                        chunks.push(self.chunks.chunk(json!({"reasoning_signature": delta["signature"]}), None))
                    }
                    _ => {} // citations: nothing to surface in the unified form
                }
            }
            "message_delta" => {
                let output = data["usage"]["output_tokens"].as_u64();
                if output.is_some() {
                    self.usage.completion = output;
                }
                let finish = data["delta"]["stop_reason"].as_str().map(finish_reason);
                chunks.push(self.chunks.chunk(json!({}), Some(finish.unwrap_or("stop"))));
                if self.include_usage {
                    chunks.push(self.chunks.usage_chunk(self.usage.to_json()));
                }
            }
            "message_stop" => {
                self.done = true;
                return Ok(StreamOutput { chunks, done: true });
            }
            "error" => {
                let error = &data["error"];
                let message = error["message"].as_str().unwrap_or("upstream stream error");
                let status = match error["type"].as_str() {
                    Some("overloaded_error") => 529,
                    Some("rate_limit_error") => 429,
                    Some("invalid_request_error") => 400,
                    _ => 500,
                };
                let mut e = adapter_error(classify(status, error["type"].as_str(), message), message);
                e.status = Some(status);
                return Err(e);
            }
            _ => {} // ping, content_block_stop
        }
        Ok(StreamOutput { chunks, done: false })
    }
}
