//! The `{{name}}` policy: refuses a request whose last user message is empty, and replaces the
//! value after `password:` with `[REDACTED]` in answers and streamed answers.

wit_bindgen::generate!({ world: "policy-world", path: "wit" });

use exports::switchyard::policy::policy::Guest;
use serde_json::Value;
use switchyard::policy::types::{Context, Denial, Finish, Hooks, Metadata, Verdict};

/// Characters of streamed text the host holds back from the client: a `password: value` up to
/// this long that arrives split across chunks is still seen whole before any of it is sent.
const HOLD_BACK: u32 = 32;

const KEYWORD: &str = "password:";
const REDACTED: &str = "[REDACTED]";

struct Policy;

impl Guest for Policy {
    fn describe() -> Metadata {
        Metadata {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            hooks: Hooks::REQUEST | Hooks::ANSWER | Hooks::STREAM,
            hold_back: HOLD_BACK,
        }
    }

    /// The unified request (OpenAI Chat JSON): refused when its last user message is empty.
    fn on_request(_context: Context, request: String) -> Verdict {
        // Not JSON: the host's to refuse, not ours.
        let Ok(body) = serde_json::from_str::<Value>(&request) else { return Verdict::Allow };
        let messages = body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
        let Some(last) = messages.iter().rev().find(|m| m["role"] == "user") else { return Verdict::Allow };
        if text_of(&last["content"]).trim().is_empty() {
            return Verdict::Deny(Denial {
                status: 400,
                message: "the last user message is empty".into(),
                code: "empty_message".into(),
            });
        }
        Verdict::Allow
    }

    /// A whole answer (`chat.completion` JSON): each choice's text redacted.
    fn on_answer(_context: Context, answer: String) -> Verdict {
        let Ok(mut body) = serde_json::from_str::<Value>(&answer) else { return Verdict::Allow };
        let mut changed = false;
        for choice in body["choices"].as_array_mut().into_iter().flatten() {
            if let Some(Value::String(content)) = choice.get_mut("message").and_then(|m| m.get_mut("content"))
                && let Some(redacted) = redact(content, true)
            {
                *content = redacted;
                changed = true;
            }
        }
        if changed { Verdict::Rewrite(body.to_string()) } else { Verdict::Allow }
    }

    /// A stream's held text plus its newest delta: redacted where the value has ended.
    fn on_stream(_context: Context, text: String, last: bool) -> Verdict {
        match redact(&text, last) {
            Some(redacted) => Verdict::Rewrite(redacted),
            None => Verdict::Allow,
        }
    }

    fn on_finish(_context: Context, _finish: Finish) {}
}

/// A message's text: a string, or the text parts of a list.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
        _ => String::new(),
    }
}

/// `text` with the value after each `password:` (any case) replaced, or None when nothing
/// changed. A value that runs to the end of the text may still grow with the next delta: unless
/// this is the `last` text, it is left for a later call (the host keeps it held back).
fn redact(text: &str, last: bool) -> Option<String> {
    // ASCII lowercasing keeps every byte offset.
    let lower = text.to_ascii_lowercase();
    let (mut out, mut at, mut changed) = (String::new(), 0, false);
    while let Some(found) = lower[at..].find(KEYWORD) {
        let after = at + found + KEYWORD.len();
        let start = after + text[after..].len() - text[after..].trim_start_matches([' ', '\t']).len();
        let end = text[start..].find(char::is_whitespace).map_or(text.len(), |n| start + n);
        if end == start || &text[start..end] == REDACTED {
            out.push_str(&text[at..end]);
            at = end;
            continue;
        }
        if end == text.len() && !last {
            break;
        }
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = end;
        changed = true;
    }
    out.push_str(&text[at..]);
    changed.then_some(out)
}

export!(Policy);
