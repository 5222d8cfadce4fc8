//! The texts a unified request or answer carries, found and rewritten in place: message
//! contents, text parts and tool-call arguments; everything else in the JSON is left intact.

use serde_json::Value;
use std::fmt;

/// Where a text sits, numbered from 1 for people to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A request message's content (string or a `text` part).
    Message(usize),
    /// The arguments of a tool call in a request message.
    MessageToolCall(usize),
    /// An answer choice's message content.
    Choice(usize),
    /// The arguments of a tool call in an answer choice.
    ChoiceToolCall(usize),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Message(n) => write!(f, "message {n}"),
            Place::MessageToolCall(n) => write!(f, "tool-call arguments in message {n}"),
            Place::Choice(n) => write!(f, "choice {n}"),
            Place::ChoiceToolCall(n) => write!(f, "tool-call arguments in choice {n}"),
        }
    }
}

/// One text and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    pub place: Place,
    pub text: String,
}

/// Every text of a unified request; `Err` when it is not JSON.
pub fn texts_of_request(request: &str) -> Result<Vec<Text>, String> {
    let mut value = parse(request)?;
    let mut texts = Vec::new();
    walk_request(&mut value, &mut |place, text| {
        texts.push(Text { place, text: text.clone() });
        false
    });
    Ok(texts)
}

/// Every text of a whole unified answer; `Err` when it is not JSON.
pub fn texts_of_answer(answer: &str) -> Result<Vec<Text>, String> {
    let mut value = parse(answer)?;
    let mut texts = Vec::new();
    walk_answer(&mut value, &mut |place, text| {
        texts.push(Text { place, text: text.clone() });
        false
    });
    Ok(texts)
}

/// Applies `f` to every text of a unified request; the rewritten JSON when `f` changed any
/// (`f` returns the new text, or `None` to keep it), `Ok(None)` when nothing changed.
pub fn rewrite_request_text(
    request: &str,
    mut f: impl FnMut(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    rewrite_request_text_at(request, |_, text| f(text))
}

/// [`rewrite_request_text`], telling `f` where each text sits.
pub fn rewrite_request_text_at(
    request: &str,
    f: impl FnMut(Place, &str) -> Option<String>,
) -> Result<Option<String>, String> {
    rewrite(request, walk_request, f)
}

/// Applies `f` to every text of a whole unified answer, as [`rewrite_request_text`] does.
pub fn rewrite_answer_text(answer: &str, mut f: impl FnMut(&str) -> Option<String>) -> Result<Option<String>, String> {
    rewrite_answer_text_at(answer, |_, text| f(text))
}

/// [`rewrite_answer_text`], telling `f` where each text sits.
pub fn rewrite_answer_text_at(
    answer: &str,
    f: impl FnMut(Place, &str) -> Option<String>,
) -> Result<Option<String>, String> {
    rewrite(answer, walk_answer, f)
}

type Visit<'a> = dyn FnMut(Place, &mut String) -> bool + 'a;

fn parse(body: &str) -> Result<Value, String> {
    serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))
}

fn rewrite(
    body: &str,
    walk: fn(&mut Value, &mut Visit<'_>) -> bool,
    mut f: impl FnMut(Place, &str) -> Option<String>,
) -> Result<Option<String>, String> {
    let mut value = parse(body)?;
    let changed = walk(&mut value, &mut |place, text| match f(place, text) {
        Some(new) if new != *text => {
            *text = new;
            true
        }
        _ => false,
    });
    if !changed {
        return Ok(None);
    }
    serde_json::to_string(&value).map(Some).map_err(|e| e.to_string())
}

/// Visits `messages[].content` (string, or the `text` of each text part) and the arguments of
/// `messages[].tool_calls[]` (and the older `function_call`); true when a visit changed one.
fn walk_request(request: &mut Value, visit: &mut Visit<'_>) -> bool {
    let Some(messages) = request.get_mut("messages").and_then(Value::as_array_mut) else { return false };
    let mut changed = false;
    for (i, message) in messages.iter_mut().enumerate() {
        changed |= walk_message(message, Place::Message(i + 1), Place::MessageToolCall(i + 1), visit);
    }
    changed
}

/// Visits each `choices[].message`, as [`walk_request`] does a message.
fn walk_answer(answer: &mut Value, visit: &mut Visit<'_>) -> bool {
    let Some(choices) = answer.get_mut("choices").and_then(Value::as_array_mut) else { return false };
    let mut changed = false;
    for (i, choice) in choices.iter_mut().enumerate() {
        if let Some(message) = choice.get_mut("message") {
            changed |= walk_message(message, Place::Choice(i + 1), Place::ChoiceToolCall(i + 1), visit);
        }
    }
    changed
}

fn walk_message(message: &mut Value, content: Place, tool: Place, visit: &mut Visit<'_>) -> bool {
    let Some(message) = message.as_object_mut() else { return false };
    let mut changed = false;
    match message.get_mut("content") {
        Some(Value::String(text)) => changed |= visit(content, text),
        Some(Value::Array(parts)) => {
            for part in parts {
                let is_text = part.get("type").is_none_or(|t| t == "text");
                if let (true, Some(Value::String(text))) = (is_text, part.get_mut("text")) {
                    changed |= visit(content, text);
                }
            }
        }
        _ => {}
    }
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        for call in calls {
            if let Some(Value::String(arguments)) = call.get_mut("function").and_then(|f| f.get_mut("arguments")) {
                changed |= visit(tool, arguments);
            }
        }
    }
    if let Some(Value::String(arguments)) = message.get_mut("function_call").and_then(|f| f.get_mut("arguments")) {
        changed |= visit(tool, arguments);
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUEST: &str = r#"{"model":"m","messages":[{"role":"system","content":"be kind"},{"role":"user","content":[{"type":"text","text":"hi bob"},{"type":"image_url","image_url":{"url":"data:bob"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bob","arguments":"{\"who\":\"bob\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"bob ok"}],"temperature":0.5,"tools":[{"type":"function","function":{"name":"bob"}}]}"#;

    #[test]
    fn every_text_of_a_request_is_found_with_its_place() {
        let texts = texts_of_request(REQUEST).unwrap();
        let got: Vec<(String, &str)> = texts.iter().map(|t| (t.place.to_string(), t.text.as_str())).collect();
        assert_eq!(
            got,
            vec![
                ("message 1".to_string(), "be kind"),
                ("message 2".into(), "hi bob"),
                ("tool-call arguments in message 3".into(), "{\"who\":\"bob\"}"),
                ("message 4".into(), "bob ok"),
            ]
        );
    }

    #[test]
    fn a_rewrite_touches_only_texts_and_keeps_the_rest_in_order() {
        let out = rewrite_request_text(REQUEST, |t| t.contains("bob").then(|| t.replace("bob", "B"))).unwrap().unwrap();
        let expected = REQUEST
            .replace("hi bob", "hi B")
            .replace(r#"\"who\":\"bob\""#, r#"\"who\":\"B\""#)
            .replace("bob ok", "B ok");
        assert_eq!(out, expected, "names, urls and tools unchanged; key order kept");
        assert_eq!(rewrite_request_text(REQUEST, |_| None).unwrap(), None);
        assert_eq!(rewrite_request_text(REQUEST, |t| Some(t.to_string())).unwrap(), None, "same text is no change");
    }

    #[test]
    fn answers_are_walked_through_their_choices() {
        let answer = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"mail bob"},"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"bob"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3}}"#;
        let places: Vec<Place> = texts_of_answer(answer).unwrap().into_iter().map(|t| t.place).collect();
        assert_eq!(places, vec![Place::Choice(1), Place::ChoiceToolCall(2)]);
        let mut seen = Vec::new();
        let out = rewrite_answer_text_at(answer, |place, t| {
            seen.push(place);
            Some(t.replace("bob", "[B]"))
        })
        .unwrap()
        .unwrap();
        assert_eq!(out, answer.replace("bob", "[B]"));
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn odd_shapes_are_skipped_and_non_json_is_an_error() {
        assert!(texts_of_request("not json").is_err());
        assert!(rewrite_answer_text("{", |_| None).is_err());
        assert!(texts_of_request("[1,2]").unwrap().is_empty());
        assert!(texts_of_request(r#"{"messages":"x"}"#).unwrap().is_empty());
        let odd = r#"{"messages":[7,{"content":[{"type":"text","text":5},{"text":"untyped"}]},{"content":{"x":1}}]}"#;
        let texts: Vec<String> = texts_of_request(odd).unwrap().into_iter().map(|t| t.text).collect();
        assert_eq!(texts, vec!["untyped"]);
        assert!(texts_of_answer(r#"{"choices":[{"delta":{"content":"x"}}]}"#).unwrap().is_empty());
    }
}
