//! The `limits` policy: caps a request's model, offered tools, prompt size and output tokens
//! before it goes upstream, refusing it or (for output tokens, with `clamp`) rewriting it down.

use policy_kit::{
    Context, Finish, Guest, Hooks, Metadata, Verdict, comma_list, deny, misconfigured, parse_bool, setting,
    texts_of_request,
};
use serde_json::Value;

#[derive(Debug, Default)]
struct Config {
    max_prompt_tokens: Option<u64>,
    max_tokens: Option<u64>,
    clamp: bool,
    allowed_tools: Option<Vec<String>>,
    allowed_models: Option<Vec<String>>,
}

fn number(settings: &[(String, String)], key: &str) -> Result<Option<u64>, String> {
    match setting(settings, key).map(str::trim) {
        None => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| format!("`{key}` is `{v}`; it must be a whole number")),
    }
}

fn config(settings: &[(String, String)]) -> Result<Config, String> {
    let clamp = match setting(settings, "clamp") {
        None => false,
        Some(v) => parse_bool(v).ok_or_else(|| format!("`clamp` is `{v}`; it must be `true` or `false`"))?,
    };
    Ok(Config {
        max_prompt_tokens: number(settings, "max_prompt_tokens")?,
        max_tokens: number(settings, "max_tokens")?,
        clamp,
        allowed_tools: setting(settings, "allowed_tools").map(comma_list),
        allowed_models: setting(settings, "allowed_models").map(comma_list),
    })
}

/// A rough token count: about four bytes of text a token, rounded up.
fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The names of the tools a request offers: `tools[].function.name` (a non-function tool by its
/// `type`) and the older `functions[].name`.
fn offered_tools(request: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in request.get("tools").and_then(Value::as_array).into_iter().flatten() {
        let name = tool.get("function").and_then(|f| f.get("name")).or_else(|| tool.get("type"));
        if let Some(name) = name.and_then(Value::as_str) {
            names.push(name.to_string());
        }
    }
    for function in request.get("functions").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            names.push(name.to_string());
        }
    }
    names
}

const OUTPUT_FIELDS: [&str; 2] = ["max_tokens", "max_completion_tokens"];

fn check_request(context_model: &str, settings: &[(String, String)], request: &str) -> Verdict {
    let config = match config(settings) {
        Ok(c) => c,
        Err(problem) => return misconfigured("limits", &problem),
    };
    let Ok(mut body) = serde_json::from_str::<Value>(request) else { return Verdict::Allow };
    if !body.is_object() {
        return Verdict::Allow;
    }

    if let Some(allowed) = &config.allowed_models {
        let model = body.get("model").and_then(Value::as_str).unwrap_or(context_model);
        if !allowed.iter().any(|m| m == model) {
            return deny(403, "model_not_allowed", format!("the model `{model}` is not allowed here"));
        }
    }

    if let Some(allowed) = &config.allowed_tools
        && let Some(tool) = offered_tools(&body).into_iter().find(|t| !allowed.contains(t))
    {
        return deny(
            400,
            "tool_not_allowed",
            format!("the request offers the tool `{tool}`, which is not allowed here"),
        );
    }

    if let Some(max) = config.max_prompt_tokens {
        let bytes: usize = texts_of_request(request).unwrap_or_default().iter().map(|t| t.text.len()).sum();
        let estimate = estimate_tokens(bytes);
        if estimate > max {
            return deny(
                400,
                "prompt_too_long",
                format!("the prompt is about {estimate} tokens; at most {max} are allowed here"),
            );
        }
    }

    let Some(cap) = config.max_tokens else { return Verdict::Allow };
    // A field that is not a whole number is left for the host to judge.
    let asked: Vec<(&str, u64)> =
        OUTPUT_FIELDS.iter().filter_map(|f| body.get(*f).and_then(Value::as_u64).map(|n| (*f, n))).collect();
    let named = OUTPUT_FIELDS.iter().any(|f| body.get(*f).is_some_and(|v| !v.is_null()));
    if let Some(&(field, n)) = asked.iter().find(|(_, n)| *n > cap) {
        if !config.clamp {
            return deny(
                400,
                "max_tokens_too_high",
                format!("the request asks for up to {n} output tokens (`{field}`); at most {cap} are allowed here"),
            );
        }
    } else if named || !config.clamp {
        return Verdict::Allow;
    }
    let object = body.as_object_mut().expect("checked above");
    if named {
        for (field, n) in asked {
            if n > cap {
                object.insert(field.to_string(), Value::from(cap));
            }
        }
    } else {
        object.insert("max_tokens".into(), Value::from(cap));
    }
    serde_json::to_string(&body).map_or(Verdict::Allow, Verdict::Rewrite)
}

struct Limits;

impl Guest for Limits {
    fn describe() -> Metadata {
        policy_kit::metadata("limits", Hooks::REQUEST, 0)
    }

    fn on_request(context: Context, request: String) -> Verdict {
        check_request(&context.requested_model, &context.settings, &request)
    }

    /// Never called: only the request hook is declared.
    fn on_answer(_context: Context, _answer: String) -> Verdict {
        Verdict::Allow
    }

    /// Never called: only the request hook is declared.
    fn on_stream(_context: Context, _text: String, _last: bool) -> Verdict {
        Verdict::Allow
    }

    fn on_finish(_context: Context, _finish: Finish) {}
}

policy_kit::export!(Limits);

#[cfg(test)]
mod tests {
    use super::*;
    use policy_kit::testing::{denial, settings};

    fn check(pairs: &[(&str, &str)], request: &str) -> Verdict {
        check_request("m", &settings(pairs), request)
    }

    const REQUEST: &str = r#"{"model":"gpt-x","messages":[{"role":"user","content":"12345678"},{"role":"user","content":[{"type":"text","text":"abc"}]}],"tools":[{"type":"function","function":{"name":"search"}},{"type":"function","function":{"name":"shell"}}],"max_tokens":500}"#;

    #[test]
    fn no_settings_no_limits() {
        assert_eq!(check(&[], REQUEST), Verdict::Allow);
        assert_eq!(check(&[("max_tokens", "10")], "not json"), Verdict::Allow);
        assert_eq!(check(&[("max_tokens", "10")], "[1]"), Verdict::Allow);
    }

    #[test]
    fn only_allowed_models_pass() {
        assert_eq!(check(&[("allowed_models", "gpt-x, other")], REQUEST), Verdict::Allow);
        let (status, code, message) = denial(check(&[("allowed_models", "other")], REQUEST));
        assert_eq!(
            (status, code.as_str(), message.as_str()),
            (403, "model_not_allowed", "the model `gpt-x` is not allowed here")
        );
        assert_eq!(
            denial(check(&[("allowed_models", "")], REQUEST)).1,
            "model_not_allowed",
            "an empty list allows none"
        );
        assert_eq!(
            check_request("other", &settings(&[("allowed_models", "other")]), r#"{"messages":[]}"#),
            Verdict::Allow
        );
    }

    #[test]
    fn only_allowed_tools_may_be_offered() {
        assert_eq!(check(&[("allowed_tools", "search,shell")], REQUEST), Verdict::Allow);
        let (status, code, message) = denial(check(&[("allowed_tools", "search")], REQUEST));
        assert_eq!((status, code.as_str()), (400, "tool_not_allowed"));
        assert_eq!(message, "the request offers the tool `shell`, which is not allowed here");
        let legacy = r#"{"model":"m","messages":[],"functions":[{"name":"old"}],"tools":[{"type":"web_search"}]}"#;
        assert!(denial(check(&[("allowed_tools", "old")], legacy)).2.contains("`web_search`"));
        assert!(denial(check(&[("allowed_tools", "web_search")], legacy)).2.contains("`old`"));
        assert_eq!(check(&[("allowed_tools", "")], r#"{"model":"m","messages":[]}"#), Verdict::Allow);
    }

    #[test]
    fn the_prompt_estimate_is_text_bytes_over_four_rounded_up() {
        // 8 + 3 = 11 bytes of text: 3 tokens.
        assert_eq!(check(&[("max_prompt_tokens", "3")], REQUEST), Verdict::Allow);
        let (status, code, message) = denial(check(&[("max_prompt_tokens", "2")], REQUEST));
        assert_eq!((status, code.as_str()), (400, "prompt_too_long"));
        assert_eq!(message, "the prompt is about 3 tokens; at most 2 are allowed here");
        assert_eq!((estimate_tokens(0), estimate_tokens(4), estimate_tokens(5)), (0, 1, 2));
    }

    #[test]
    fn max_tokens_over_the_cap_is_refused_or_clamped() {
        assert_eq!(check(&[("max_tokens", "500")], REQUEST), Verdict::Allow);
        let (status, code, message) = denial(check(&[("max_tokens", "100")], REQUEST));
        assert_eq!((status, code.as_str()), (400, "max_tokens_too_high"));
        assert_eq!(
            message,
            "the request asks for up to 500 output tokens (`max_tokens`); at most 100 are allowed here"
        );
        assert_eq!(
            check(&[("max_tokens", "100"), ("clamp", "true")], REQUEST),
            Verdict::Rewrite(REQUEST.replace("\"max_tokens\":500", "\"max_tokens\":100"))
        );
        let both = r#"{"model":"m","messages":[],"max_completion_tokens":900,"max_tokens":50}"#;
        assert!(denial(check(&[("max_tokens", "100")], both)).2.contains("`max_completion_tokens`"));
        assert_eq!(
            check(&[("max_tokens", "100"), ("clamp", "yes")], both),
            Verdict::Rewrite(both.replace("900", "100")),
            "only the field over the cap changes"
        );
    }

    #[test]
    fn with_clamp_a_request_naming_no_limit_gets_the_cap() {
        let none = r#"{"model":"m","messages":[]}"#;
        assert_eq!(check(&[("max_tokens", "64")], none), Verdict::Allow);
        assert_eq!(
            check(&[("max_tokens", "64"), ("clamp", "true")], none),
            Verdict::Rewrite(r#"{"model":"m","messages":[],"max_tokens":64}"#.into())
        );
        let null = r#"{"model":"m","messages":[],"max_tokens":null}"#;
        assert_eq!(
            check(&[("max_tokens", "64"), ("clamp", "true")], null),
            Verdict::Rewrite(r#"{"model":"m","messages":[],"max_tokens":64}"#.into())
        );
        let odd = r#"{"model":"m","messages":[],"max_tokens":"lots"}"#;
        assert_eq!(check(&[("max_tokens", "64"), ("clamp", "true")], odd), Verdict::Allow, "the host judges it");
    }

    #[test]
    fn a_malformed_setting_is_named() {
        for (key, value) in [("max_tokens", "ten"), ("max_prompt_tokens", "-1"), ("clamp", "maybe")] {
            let (status, code, message) = denial(check(&[(key, value)], REQUEST));
            assert_eq!((status, code.as_str()), (500, "policy_misconfigured"));
            assert!(message.contains(&format!("`{key}`")), "{message}");
        }
    }

    #[test]
    fn describe_declares_only_the_request_hook() {
        let m = Limits::describe();
        assert_eq!((m.name.as_str(), m.hooks, m.hold_back), ("limits", Hooks::REQUEST, 0));
    }
}
