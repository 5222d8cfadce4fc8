//! Responses SSE → unified chunks: text and reasoning-summary deltas, function calls indexed
//! by their order among function calls, and the terminal `response.completed` /
//! `response.incomplete` (finish reason and usage) or `response.failed` (a classified error).

use std::collections::HashMap;

use adapter_kit::errors::adapter_error;
use adapter_kit::unified::ChunkBuilder;
use adapter_kit::{AdapterError, ErrorKind, StreamEvent, StreamOutput, host};
use serde_json::{Value, json};

use super::{failure, finish_reason, usage_of};

/// Function calls one stream may open (an upstream cannot make the books grow past it).
const MAX_CALLS: usize = 128;

#[derive(Default)]
pub struct StreamState {
    pub include_usage: bool,
    pub done: bool,
    chunks: ChunkBuilder,
    /// Output index → the unified tool-call index of a function_call item.
    tool_index: HashMap<u64, usize>,
}

impl StreamState {
    pub fn event(&mut self, event: &StreamEvent, model: &str) -> Result<StreamOutput, AdapterError> {
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| adapter_error(ErrorKind::InvalidResponse, &format!("stream event is not JSON: {e}")))?;
        let kind = data["type"].as_str().unwrap_or(event.event.as_str());
        let mut chunks = Vec::new();
        match kind {
            "response.created" => {
                let response = &data["response"];
                self.chunks = ChunkBuilder {
                    id: response["id"].as_str().unwrap_or_default().to_string(),
                    model: response["model"].as_str().unwrap_or(model).to_string(),
                    created: response["created_at"].as_u64().unwrap_or_else(|| host::now_unix_ms() / 1000),
                };
                chunks.push(self.chunks.chunk(json!({"role": "assistant", "content": ""}), None));
            }
            "response.output_item.added" if data["item"]["type"] == "function_call" => {
                if self.tool_index.len() >= MAX_CALLS {
                    return Err(adapter_error(
                        ErrorKind::InvalidResponse,
                        "more function calls than one stream may open",
                    ));
                }
                let index = self.tool_index.len();
                self.tool_index.insert(data["output_index"].as_u64().unwrap_or(0), index);
                let item = &data["item"];
                chunks.push(self.chunks.chunk(
                    json!({"tool_calls": [{"index": index, "id": item["call_id"], "type": "function", "function": {"name": item["name"], "arguments": ""}}]}),
                    None,
                ));
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                chunks.push(self.chunks.chunk(json!({"content": data["delta"]}), None));
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                chunks.push(self.chunks.chunk(json!({"reasoning_content": data["delta"]}), None));
            }
            "response.function_call_arguments.delta" => {
                let Some(index) = self.tool_index.get(&data["output_index"].as_u64().unwrap_or(0)) else {
                    return Err(adapter_error(
                        ErrorKind::InvalidResponse,
                        "arguments for an item that is not a function call",
                    ));
                };
                if let Some(fragment) = data["delta"].as_str().filter(|f| !f.is_empty()) {
                    chunks.push(
                        self.chunks.chunk(
                            json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                            None,
                        ),
                    );
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = &data["response"];
                let finish = finish_reason(response, !self.tool_index.is_empty());
                chunks.push(self.chunks.chunk(json!({}), Some(finish)));
                if self.include_usage && response["usage"].is_object() {
                    chunks.push(self.chunks.usage_chunk(usage_of(&response["usage"]).to_json()));
                }
                self.done = true;
                return Ok(StreamOutput { chunks, done: true });
            }
            "response.failed" => return Err(failure(&data["response"]["error"])),
            "error" => return Err(failure(&data)),
            _ => {} // in_progress, item and part boundaries, annotations: nothing for the unified form
        }
        Ok(StreamOutput { chunks, done: false })
    }
}
