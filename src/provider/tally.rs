//! What a unified answer adds up to, for the books: the tokens it used (quotas) and the
//! assistant message it produced (affinity binds the conversation's next turn by it).

use serde::Deserialize;
use serde_json::{Value, json};

/// Tokens and the assistant's message, from a whole response or summed over stream chunks.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the upstream's cache, when it says.
    pub cached_tokens: Option<u64>,
    total_tokens: Option<u64>,
    content: String,
    /// (id, name, arguments) by tool-call index.
    tool_calls: Vec<(String, String, String)>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    total_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct Function {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ToolCall {
    index: Option<usize>,
    id: Option<String>,
    #[serde(default)]
    function: Function,
}

#[derive(Deserialize, Default)]
struct Message {
    /// A string in every unified answer; anything else is left uncounted, not fatal.
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<Message>,
    delta: Option<Message>,
}

/// The parts of a unified response or chunk the books need; the rest is skipped unread.
#[derive(Deserialize)]
struct View {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

impl Tally {
    /// A whole unified response (chat or embeddings).
    pub fn of_response(json: &str) -> Tally {
        let mut tally = Tally::default();
        tally.add(json, |choice| choice.message);
        tally
    }

    /// One unified stream chunk.
    pub fn add_chunk(&mut self, json: &str) {
        self.add(json, |choice| choice.delta);
    }

    fn add(&mut self, json: &str, part: fn(Choice) -> Option<Message>) {
        let Ok(view) = serde_json::from_str::<View>(json) else { return };
        if let Some(u) = view.usage {
            (self.prompt_tokens, self.completion_tokens, self.total_tokens) =
                (u.prompt_tokens, u.completion_tokens, u.total_tokens);
            self.cached_tokens = u.prompt_tokens_details.and_then(|d| d.cached_tokens);
        }
        let Some(message) = view.choices.into_iter().next().and_then(part) else { return };
        self.content.push_str(message.content.as_ref().and_then(Value::as_str).unwrap_or_default());
        for (position, call) in message.tool_calls.into_iter().enumerate() {
            let index = call.index.unwrap_or(position);
            if self.tool_calls.len() <= index {
                self.tool_calls.resize(index + 1, Default::default());
            }
            let slot = &mut self.tool_calls[index];
            if let Some(id) = call.id {
                slot.0 = id;
            }
            if let Some(name) = call.function.name {
                slot.1 = name;
            }
            slot.2.push_str(call.function.arguments.as_deref().unwrap_or_default());
        }
    }

    /// Tokens the answer used: the upstream's total, or prompt + completion.
    pub fn tokens(&self) -> u64 {
        self.total_tokens.unwrap_or(self.prompt_tokens + self.completion_tokens)
    }

    /// The assistant message as a client would send it back in its next turn.
    pub fn assistant_message(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content});
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = self
                .tool_calls
                .iter()
                .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
                .collect();
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_and_the_equivalent_response_add_up_to_the_same_tally() {
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"w","arguments":"{\"ci"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}"#,
        ];
        let mut streamed = Tally::default();
        for c in chunks {
            streamed.add_chunk(c);
        }
        let whole = Tally::of_response(
            r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello","tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}"#,
        );
        assert_eq!(streamed, whole);
        assert_eq!(streamed.tokens(), 21);
        assert_eq!(streamed.assistant_message()["tool_calls"][0]["function"]["arguments"], "{\"city\":1}");
    }

    #[test]
    fn tokens_fall_back_to_prompt_plus_completion_and_bad_json_counts_nothing() {
        let t = Tally::of_response(r#"{"object":"list","data":[],"usage":{"prompt_tokens":8}}"#);
        assert_eq!(t.tokens(), 8, "embeddings report prompt tokens only");
        let mut t = Tally::default();
        t.add_chunk("not json");
        assert_eq!(t.tokens(), 0);
        assert_eq!(t.assistant_message(), json!({"role": "assistant", "content": ""}));
    }
}
