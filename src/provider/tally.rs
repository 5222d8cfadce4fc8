//! What a unified answer adds up to, for the books: the tokens it used (quotas) and the
//! assistant message it produced (affinity binds the conversation's next turn by it).

use serde_json::{Value, json};
use switchyard_unified::{Choice, Message, Reply, UsageJson};

/// Tool calls one answer may carry in the books; an upstream's index is untrusted input, and
/// calls past this bound are left out of the tally (the client still gets them).
const MAX_TOOL_CALLS: usize = 128;

/// Tokens and the assistant's message, from a whole response or summed over stream chunks.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the upstream's cache, when it says.
    pub cached_tokens: Option<u64>,
    /// Prompt tokens written to the upstream's cache (Anthropic's cache writes), when it says.
    pub cache_write_tokens: Option<u64>,
    /// Images generated (an image model's answer; the door that knows counts them).
    pub images: u64,
    total_tokens: Option<u64>,
    /// Which counts the upstream reported (a number; `null` or absent is not a report): the
    /// others are estimated, never taken as 0.
    prompt_seen: bool,
    completion_seen: bool,
    /// Whether `prompt_tokens`/`completion_tokens` are (partly) the gateway's estimate.
    pub estimated: bool,
    content: String,
    /// Bytes of reasoning text and of the choices after the first (counted, not kept).
    reasoning_bytes: usize,
    /// (id, name, arguments) by tool-call index.
    tool_calls: Vec<(String, String, String)>,
    /// Why the first choice ended (`stop`, `length`, `tool_calls`...), once the upstream says.
    pub finish_reason: Option<String>,
}

/// Longest finish reason kept.
const MAX_FINISH_REASON: usize = 64;

/// Bytes of text a message carries: content, reasoning and tool calls.
fn generated_bytes(message: &Message) -> usize {
    let text = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).map_or(0, str::len);
    let calls: usize = message
        .tool_calls
        .iter()
        .map(|c| c.function.name.as_ref().map_or(0, String::len) + c.function.arguments.as_ref().map_or(0, String::len))
        .sum();
    text(&message.content) + text(&message.reasoning_content) + calls
}

impl Tally {
    /// A whole unified response (chat or embeddings).
    pub fn of_response(json: &str) -> Tally {
        let mut tally = Tally::default();
        tally.add(json, |choice| choice.message);
        tally
    }

    /// One unified stream chunk; true when it carries only usage (OpenAI's last chunk with
    /// `stream_options.include_usage`), which a client that did not ask for it is not sent.
    pub fn add_chunk(&mut self, json: &str) -> bool {
        self.add(json, |choice| choice.delta)
    }

    fn add(&mut self, json: &str, part: fn(Choice) -> Option<Message>) -> bool {
        let Some(mut reply) = Reply::parse(json) else { return false };
        // The first choice's, as the upstream wrote it (bounded: it goes to traces).
        if let Some(reason) = reply.choices.first_mut().and_then(|c| c.finish_reason.take())
            && let Some(reason) = reason.as_str().filter(|r| r.len() <= MAX_FINISH_REASON)
        {
            self.finish_reason = Some(reason.to_string());
        }
        let usage_only = reply.choices.is_empty() && reply.usage.is_some();
        if let Some(usage) = reply.usage {
            self.read_usage(usage);
        }
        let mut choices = reply.choices.into_iter();
        let first = choices.next().and_then(part);
        // Further choices (`n` > 1) count for estimates; the books' message is the first one.
        for message in choices.filter_map(part) {
            self.reasoning_bytes += generated_bytes(&message);
        }
        let Some(message) = first else { return usage_only };
        self.content.push_str(message.content.as_ref().and_then(Value::as_str).unwrap_or_default());
        self.reasoning_bytes += message.reasoning_content.as_ref().and_then(Value::as_str).map_or(0, str::len);
        for (position, call) in message.tool_calls.into_iter().enumerate() {
            let index = call.index.map_or(position, |i| usize::try_from(i).unwrap_or(usize::MAX));
            if index >= MAX_TOOL_CALLS {
                continue;
            }
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
        false
    }

    /// Takes the counts a usage object reports; a count it leaves `null` (Anthropic's output
    /// tokens before the end of a stream, say) keeps what an earlier one said.
    fn read_usage(&mut self, mut usage: UsageJson) {
        // An upstream's counts are untrusted: beyond any real call, and kept far from the
        // overflow of what they are multiplied by.
        let cap = |n: &mut Option<u64>| *n = n.map(|n| n.min(MAX_REPORTED_TOKENS));
        cap(&mut usage.prompt_tokens);
        cap(&mut usage.completion_tokens);
        cap(&mut usage.total_tokens);
        if let Some(details) = usage.prompt_tokens_details.as_mut() {
            cap(&mut details.cached_tokens);
            cap(&mut details.cache_creation_tokens);
        }
        if let Some(prompt) = usage.prompt_tokens {
            (self.prompt_tokens, self.prompt_seen) = (prompt, true);
        }
        if let Some(completion) = usage.completion_tokens {
            (self.completion_tokens, self.completion_seen) = (completion, true);
        }
        if usage.total_tokens.is_some() {
            self.total_tokens = usage.total_tokens;
        }
        if let Some(details) = usage.prompt_tokens_details {
            if let Some(cached) = details.cached_tokens {
                self.cached_tokens = Some(cached);
            }
            if let Some(written) = details.cache_creation_tokens {
                self.cache_write_tokens = Some(written);
            }
        }
    }

    /// An image answer: the images it carries (its `data` entries) and, from a model priced by
    /// its image tokens (OpenAI's `gpt-image-*`), the `usage` it reports in its own names.
    pub fn read_images(&mut self, answer: &str) {
        #[derive(serde::Deserialize)]
        struct Images {
            #[serde(default)]
            data: Vec<serde::de::IgnoredAny>,
            #[serde(default)]
            usage: Option<ImageUsage>,
        }
        #[derive(serde::Deserialize)]
        struct ImageUsage {
            input_tokens: Option<u64>,
            output_tokens: Option<u64>,
        }
        let Ok(images) = serde_json::from_str::<Images>(answer) else { return };
        self.images = images.data.len() as u64;
        if let Some(usage) = images.usage {
            if let Some(input) = usage.input_tokens {
                (self.prompt_tokens, self.prompt_seen) = (input.min(MAX_REPORTED_TOKENS), true);
            }
            if let Some(output) = usage.output_tokens {
                (self.completion_tokens, self.completion_seen) = (output.min(MAX_REPORTED_TOKENS), true);
                self.total_tokens = None;
            }
        }
    }

    /// Estimates what the upstream did not report (about 4 bytes of text a token):
    /// `prompt_estimate` for the request, the text generated so far for the completion.
    pub fn settle(&mut self, prompt_estimate: u64) {
        let generated = self.content.len()
            + self.reasoning_bytes
            + self.tool_calls.iter().map(|(id, name, args)| id.len() + name.len() + args.len()).sum::<usize>();
        // An answer with no text (embeddings) reports no completion tokens: 0 is the truth.
        let completion_missing = !self.completion_seen && generated > 0;
        if self.prompt_seen && !completion_missing {
            return;
        }
        if !self.prompt_seen {
            self.prompt_tokens = prompt_estimate;
        }
        if completion_missing {
            self.completion_tokens = (generated as u64).div_ceil(BYTES_PER_TOKEN);
        }
        self.total_tokens = None;
        self.estimated = true;
    }

    /// Tokens the answer used: the upstream's total, or prompt + completion.
    pub fn tokens(&self) -> u64 {
        self.total_tokens.unwrap_or(self.prompt_tokens.saturating_add(self.completion_tokens))
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

/// The most tokens one count of an upstream's usage is taken at (2^40, a trillion).
const MAX_REPORTED_TOKENS: u64 = 1 << 40;

/// The rough size of a token in bytes of text, for estimates.
const BYTES_PER_TOKEN: u64 = 4;
/// What an image in a request is estimated at (a low-detail image's cost at OpenAI).
const TOKENS_PER_IMAGE: u64 = 85;
/// The most an image in a request is taken to cost, for a budget's worst case (a large image
/// at Anthropic is about 1,600 tokens).
const MAX_TOKENS_PER_IMAGE: u64 = 1_600;

/// Estimated prompt tokens of a unified request: its text at about 4 bytes a token, each
/// inline image (a JSON string `"data:image/…;base64,…"`) at a flat rate instead of its
/// encoded size. One linear scan.
pub fn prompt_estimate(unified: &str) -> u64 {
    PromptSize::of(unified).estimate()
}

/// What a unified request's prompt is made of: bytes of text and inline images.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptSize {
    pub text_bytes: u64,
    pub images: u64,
}

impl PromptSize {
    /// Tokens at about 4 bytes of text each and a flat rate per image: the books' estimate.
    pub fn estimate(self) -> u64 {
        self.text_bytes.div_ceil(BYTES_PER_TOKEN).saturating_add(self.images.saturating_mul(TOKENS_PER_IMAGE))
    }

    /// Tokens the prompt cannot exceed (a token is at least a byte of text; a large image),
    /// what a budget sets aside so that parallel calls cannot overrun it.
    pub fn upper_bound(self) -> u64 {
        self.text_bytes.saturating_add(self.images.saturating_mul(MAX_TOKENS_PER_IMAGE))
    }

    /// One linear scan of `unified`.
    pub fn of(unified: &str) -> PromptSize {
        const MARK: &str = "\"data:image/";
        let (mut text, mut images, mut rest) = (0usize, 0u64, unified);
        while let Some(at) = rest.find(MARK) {
            let data = &rest[at + 1..];
            let end = data.find('"').unwrap_or(data.len());
            // Only base64 counts as an image; anything else is text like the rest.
            let is_image = data[..end].split_once(',').is_some_and(|(head, _)| head.ends_with(";base64"));
            if is_image {
                text += at;
                images += 1;
            } else {
                text += at + 1 + end;
            }
            rest = &data[end..];
        }
        text += rest.len();
        PromptSize { text_bytes: text as u64, images }
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
    fn hostile_tool_call_indexes_are_left_out_not_allocated() {
        let mut t = Tally::default();
        for index in ["100000000000000", "18446744073709551615", "127"] {
            t.add_chunk(&format!(
                r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{index},"function":{{"name":"f","arguments":"x"}}}}]}}}}]}}"#
            ));
        }
        let calls = t.assistant_message()["tool_calls"].as_array().unwrap().len();
        assert_eq!(calls, 128, "only the in-bounds index 127 makes room");
        t.add_chunk(r#"{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}"#);
        assert_eq!(t.tokens(), 0);
    }

    #[test]
    fn without_usage_the_books_get_an_estimate_marked_as_such() {
        let mut t = Tally::default();
        assert!(!t.add_chunk(r#"{"choices":[{"delta":{"content":"abcdefgh","reasoning_content":"1234"}}]}"#));
        t.settle(7);
        assert_eq!((t.prompt_tokens, t.completion_tokens, t.tokens(), t.estimated), (7, 3, 10, true));

        let mut t = Tally::default();
        t.add_chunk(r#"{"choices":[{"delta":{"content":"abcd"}},{"index":1,"delta":{"content":"efghijkl"}}]}"#);
        t.settle(0);
        assert_eq!(t.completion_tokens, 3, "every choice counts");

        let mut t = Tally::default();
        assert!(t.add_chunk(r#"{"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}"#));
        t.settle(7);
        assert_eq!((t.tokens(), t.estimated), (3, false), "reported usage is never replaced");
    }

    #[test]
    fn a_null_count_is_not_a_reported_zero() {
        // Anthropic's stream: input tokens at the start, output tokens null until the end.
        let mut t = Tally::default();
        t.add_chunk(
            r#"{"choices":[{"delta":{"content":"abcdefgh"}}],"usage":{"prompt_tokens":40,"completion_tokens":null}}"#,
        );
        t.add_chunk(r#"{"choices":[],"usage":{"prompt_tokens":null,"completion_tokens":5}}"#);
        t.settle(7);
        assert_eq!((t.prompt_tokens, t.completion_tokens, t.estimated), (40, 5, false), "each count from its report");

        // A stream that never reports its output tokens: estimated from the text, not 0.
        let mut t = Tally::default();
        t.add_chunk(r#"{"choices":[{"delta":{"content":"abcdefgh"}}],"usage":{"prompt_tokens":40,"completion_tokens":null,"total_tokens":null}}"#);
        t.settle(7);
        assert_eq!((t.prompt_tokens, t.completion_tokens, t.tokens(), t.estimated), (40, 2, 42, true));

        let mut t = Tally::default();
        t.add_chunk(
            r#"{"choices":[{"delta":{"content":"abcd"}}],"usage":{"prompt_tokens":null,"completion_tokens":null}}"#,
        );
        t.settle(7);
        assert_eq!((t.prompt_tokens, t.completion_tokens, t.estimated), (7, 1, true));
    }

    #[test]
    fn hostile_counts_are_capped_and_image_answers_read_their_own_usage() {
        let mut t = Tally::default();
        t.add_chunk(r#"{"choices":[],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":18446744073709551615,"prompt_tokens_details":{"cached_tokens":18446744073709551615}}}"#);
        assert_eq!((t.prompt_tokens, t.completion_tokens, t.cached_tokens), (1 << 40, 1 << 40, Some(1 << 40)));
        let mut t = Tally::default();
        t.read_images(r#"{"created":1,"data":[{"b64_json":"x"},{"b64_json":"y"}],"usage":{"input_tokens":50,"output_tokens":4160,"total_tokens":4210}}"#);
        t.settle(7);
        assert_eq!((t.images, t.prompt_tokens, t.completion_tokens, t.estimated), (2, 50, 4160, false));
    }

    #[test]
    fn a_budgets_bound_on_a_prompt_is_never_below_its_tokens() {
        let text = r#"{"messages":[{"role":"user","content":"日本語のテキスト"}]}"#;
        let size = PromptSize::of(text);
        assert!(size.upper_bound() >= "日本語のテキスト".chars().count() as u64 * 2, "a token per byte at most");
        assert!(size.upper_bound() > size.estimate());
        let image = format!(r#"{{"url":"data:image/png;base64,{}"}}"#, "A".repeat(1000));
        assert_eq!(PromptSize::of(&image).images, 1);
        assert!(PromptSize::of(&image).upper_bound() >= 1_600);
    }

    #[test]
    fn prompt_estimates_count_text_and_price_inline_images_flat() {
        let text = r#"{"messages":[{"role":"user","content":"0123456789abcdef"}]}"#;
        assert_eq!(prompt_estimate(text), (text.len() as u64).div_ceil(4));
        let image = format!(r#"{{"url":"data:image/png;base64,{}"}}"#, "A".repeat(1 << 20));
        assert!(prompt_estimate(&image) < 100, "{}", prompt_estimate(&image));
        let posing = format!(r#"{{"content":"x;base64,{}"}}"#, "A".repeat(1 << 20));
        assert!(prompt_estimate(&posing) > (1 << 18), "text that merely mentions base64 is text");
        let posing = format!(r#"{{"content":"data:image/png,{}"}}"#, "A".repeat(1 << 20));
        assert!(prompt_estimate(&posing) > (1 << 18), "not base64: text");
    }

    #[test]
    fn tokens_fall_back_to_prompt_plus_completion_and_bad_json_counts_nothing() {
        let mut t = Tally::of_response(r#"{"object":"list","data":[],"usage":{"prompt_tokens":8}}"#);
        t.settle(3);
        assert_eq!((t.tokens(), t.estimated), (8, false), "embeddings report prompt tokens only");
        let mut t = Tally::default();
        t.add_chunk("not json");
        assert_eq!(t.tokens(), 0);
        assert_eq!(t.assistant_message(), json!({"role": "assistant", "content": ""}));
    }

    #[test]
    fn the_first_choices_finish_reason_is_kept_when_short() {
        let mut t = Tally::default();
        t.add_chunk(r#"{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}"#);
        assert_eq!(t.finish_reason, None);
        t.add_chunk(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#);
        assert_eq!(t.finish_reason.as_deref(), Some("length"));
        let long = format!(r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{}"}}]}}"#, "x".repeat(1000));
        t.add_chunk(&long);
        assert_eq!(t.finish_reason.as_deref(), Some("length"), "an overlong reason is not kept");
    }
}
