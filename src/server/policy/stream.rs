//! Policies on a streamed answer: each choice's text is held back by the chain's largest
//! `hold-back` (so a pattern split across chunks is seen whole), checked, and released.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::Stage;
use crate::plugin::{Outcome, release_held};
use crate::provider::{AttemptError, ChunkGuard};

/// Choices a stream may carry text for; past these, text of further choices passes unchecked
/// would be a hole, so such a stream is ended instead.
const MAX_CHOICES: usize = 16;

/// The policies' stage of one stream.
pub struct Guard {
    stage: Stage,
    /// Text not yet released, per choice.
    held: BTreeMap<u64, String>,
    /// The last chunk's `id`, `created` and `model`, for a chunk that releases held text.
    head: Map<String, Value>,
    usage: (u64, u64),
    finished: bool,
}

impl Guard {
    pub(super) fn new(stage: Stage) -> Guard {
        Guard { stage, held: BTreeMap::new(), head: Map::new(), usage: (0, 0), finished: false }
    }

    async fn on_chunk(&mut self, chunk: String) -> Result<Vec<String>, AttemptError> {
        let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(&chunk) else { return Ok(vec![chunk]) };
        if let Some(usage) = object.get("usage").filter(|u| u.is_object()) {
            let count = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or(0);
            self.usage = (count("prompt_tokens"), count("completion_tokens"));
        }
        for field in ["id", "created", "model", "object"] {
            if let Some(value) = object.get(field) {
                self.head.insert(field.to_string(), value.clone());
            }
        }
        let Some(Value::Array(choices)) = object.get_mut("choices") else { return Ok(vec![chunk]) };
        let mut before = Vec::new();
        let mut touched = false;
        for (position, choice) in choices.iter_mut().enumerate() {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
            let ends = choice.get("finish_reason").is_some_and(|r| !r.is_null());
            let delta = choice.get_mut("delta").and_then(Value::as_object_mut);
            let text = match delta.and_then(|d| d.remove("content")) {
                Some(Value::String(text)) if !text.is_empty() => text,
                Some(other) => {
                    // Empty or null content passes as it came.
                    if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
                        delta.insert("content".into(), other);
                    }
                    if ends {
                        before.extend(self.flush(index).await?);
                    }
                    continue;
                }
                None => {
                    if ends {
                        before.extend(self.flush(index).await?);
                    }
                    continue;
                }
            };
            touched = true;
            if !self.held.contains_key(&index) && self.held.len() >= MAX_CHOICES {
                return Err(policy_error(400, "policy_failed", "the answer has more choices than policies can check"));
            }
            let held = self.held.entry(index).or_default();
            held.push_str(&text);
            let checked = self.stage.check_text(std::mem::take(held), ends).await.map_err(into_attempt)?;
            let released = if ends {
                self.held.remove(&index);
                checked
            } else {
                let mut checked = checked;
                let released = release_held(&mut checked, self.stage.hold_back);
                self.held.insert(index, checked);
                released
            };
            if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut)
                && !released.is_empty()
            {
                delta.insert("content".into(), Value::String(released));
            }
        }
        if !touched {
            before.push(chunk);
            return Ok(before);
        }
        // A choice whose only news was text now held says nothing: left out, and so is a
        // chunk with nothing left to say.
        choices.retain(|choice| {
            let delta_empty = choice.get("delta").and_then(Value::as_object).is_none_or(Map::is_empty);
            let ends = choice.get("finish_reason").is_some_and(|r| !r.is_null());
            !delta_empty || ends || choice.get("logprobs").is_some_and(|l| !l.is_null())
        });
        let usage = object.get("usage").is_some_and(|u| !u.is_null());
        if object.get("choices").and_then(Value::as_array).is_some_and(|c| !c.is_empty()) || usage {
            before.push(Value::Object(object).to_string());
        }
        Ok(before)
    }

    /// A chunk releasing what is held for choice `index` (checked as the last of its text).
    async fn flush(&mut self, index: u64) -> Result<Option<String>, AttemptError> {
        let Some(held) = self.held.remove(&index).filter(|h| !h.is_empty()) else { return Ok(None) };
        let text = self.stage.check_text(held, true).await.map_err(into_attempt)?;
        if text.is_empty() {
            return Ok(None);
        }
        let mut chunk = self.head.clone();
        chunk.insert("object".into(), "chat.completion.chunk".into());
        chunk.insert("choices".into(), json!([{"index": index, "delta": {"content": text}, "finish_reason": null}]));
        Ok(Some(Value::Object(chunk).to_string()))
    }

    fn finish(&mut self, outcome: Outcome) {
        if !std::mem::replace(&mut self.finished, true) {
            self.stage.finish(super::finish(outcome, self.usage.0, self.usage.1));
        }
    }
}

impl ChunkGuard for Guard {
    fn chunk(&mut self, chunk: String) -> BoxFuture<'_, Result<Vec<String>, AttemptError>> {
        Box::pin(async move {
            let out = self.on_chunk(chunk).await;
            if out.is_err() {
                self.finish(Outcome::Failed);
            }
            out
        })
    }

    fn end(&mut self) -> BoxFuture<'_, Result<Vec<String>, AttemptError>> {
        Box::pin(async move {
            let mut out = Vec::new();
            let indices: Vec<u64> = self.held.keys().copied().collect();
            for index in indices {
                match self.flush(index).await {
                    Ok(chunk) => out.extend(chunk),
                    Err(e) => {
                        self.finish(Outcome::Failed);
                        return Err(e);
                    }
                }
            }
            self.finish(Outcome::Complete);
            Ok(out)
        })
    }

    fn failed(&mut self) {
        self.finish(Outcome::Failed);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.finish(Outcome::Abandoned);
    }
}

fn into_attempt(error: super::ApiError) -> AttemptError {
    AttemptError::Policy {
        status: error.status.as_u16(),
        code: error.code.map_or_else(|| "policy_denied".into(), |c| c.into_owned()),
        message: error.message,
    }
}

fn policy_error(status: u16, code: &str, message: &str) -> AttemptError {
    AttemptError::Policy { status, code: code.into(), message: message.into() }
}
