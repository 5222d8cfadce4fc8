//! Shared by every built-in policy: the generated WIT bindings (one copy, exported through
//! `policy_kit::export!`), settings and verdict helpers, and the matching glue for streams.

pub mod bindings {
    wit_bindgen::generate!({
        world: "policy-world",
        path: "../../wit/policy",
        pub_export_macro: true,
        default_bindings_module: "policy_kit::bindings",
        export_macro_name: "export",
        additional_derives: [PartialEq, Eq],
    });
}

pub use bindings::export;

pub mod json;

/// What the policies' unit tests share: settings from pairs, a denial's parts.
pub mod testing {
    use super::Verdict;

    /// Settings as the host hands them, from `(key, value)` pairs.
    pub fn settings(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// A denial's status, code and message; any other verdict fails the test.
    pub fn denial(verdict: Verdict) -> (u16, String, String) {
        match verdict {
            Verdict::Deny(d) => (d.status, d.code, d.message),
            other => panic!("expected a denial, got {other:?}"),
        }
    }
}

/// The `Guest` of a policy whose hooks are plain functions of its settings and payload, in the
/// calling module: `check_request`, `check_answer` and `check_stream`; `on_finish` does nothing.
#[macro_export]
macro_rules! text_policy {
    ($guest:ident, $name:literal, $hooks:expr, $hold_back:expr) => {
        struct $guest;

        impl $crate::Guest for $guest {
            fn describe() -> $crate::Metadata {
                $crate::metadata($name, $hooks, $hold_back)
            }

            fn on_request(context: $crate::Context, request: String) -> $crate::Verdict {
                check_request(&context.settings, &request)
            }

            fn on_answer(context: $crate::Context, answer: String) -> $crate::Verdict {
                check_answer(&context.settings, &answer)
            }

            fn on_stream(context: $crate::Context, text: String, last: bool) -> $crate::Verdict {
                check_stream(&context.settings, &text, last)
            }

            fn on_finish(_context: $crate::Context, _finish: $crate::Finish) {}
        }

        $crate::export!($guest);
    };
}

pub use bindings::exports::switchyard::policy::policy::Guest;
pub use bindings::switchyard::policy::host;
pub use bindings::switchyard::policy::types::{Context, Denial, Finish, Hooks, Metadata, Outcome, Verdict};
pub use json::{
    Place, Text, rewrite_answer_text, rewrite_answer_text_at, rewrite_request_text, rewrite_request_text_at,
    texts_of_answer, texts_of_request,
};

/// Metadata for a built-in policy (version = the workspace version).
pub fn metadata(name: &str, hooks: Hooks, hold_back: u32) -> Metadata {
    Metadata { name: name.into(), version: env!("CARGO_PKG_VERSION").into(), hooks, hold_back }
}

/// A policy setting by key, as written under the policy's `settings:`; the first wins.
pub fn setting<'a>(settings: &'a [(String, String)], key: &str) -> Option<&'a str> {
    settings.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The items of a comma-separated setting, trimmed, empty ones dropped.
pub fn comma_list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// A boolean setting: `true`/`false` (also yes/no, on/off, 1/0), or `None` for anything else.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// A refusal with `status`, machine-readable `code` and what the client is told.
pub fn deny(status: u16, code: &str, message: impl Into<String>) -> Verdict {
    Verdict::Deny(Denial { status, message: message.into(), code: code.into() })
}

/// The refusal for a policy whose settings cannot be used: an operator's mistake, so 500.
pub fn misconfigured(policy: &str, problem: &str) -> Verdict {
    deny(500, "policy_misconfigured", format!("the {policy} policy is misconfigured: {problem}"))
}

/// Logs through the host; a no-op off wasm (native unit tests have no host).
pub fn log(level: host::LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// Whether a match starting at byte `start` of a stream's held `text` can be acted on now.
/// One starting within the last `hold_back` characters may still grow with the next delta; the
/// host keeps that tail held back, so it is left for the next call (unless this is the `last`).
pub fn settled(text: &str, start: usize, last: bool, hold_back: u32) -> bool {
    last || text[start..].chars().count() > hold_back as usize
}

/// A found span of text: bytes `start..end`, of kind `kind` (an index into the policy's kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub start: usize,
    pub end: usize,
    pub kind: usize,
}

/// Keeps the hits that overlap no earlier-kept one; `hits` come in priority order (the first
/// detector's hits win), the result is sorted by position.
pub fn disjoint(hits: Vec<Hit>) -> Vec<Hit> {
    let mut kept: Vec<Hit> = Vec::with_capacity(hits.len());
    for hit in hits {
        if !kept.iter().any(|k| hit.start < k.end && k.start < hit.end) {
            kept.push(hit);
        }
    }
    kept.sort_by_key(|h| h.start);
    kept
}

/// `text` with each of the sorted, disjoint `hits` replaced by `replacement(hit)`.
pub fn replace_hits(text: &str, hits: &[Hit], replacement: impl Fn(&Hit) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for hit in hits {
        out.push_str(&text[at..hit.start]);
        out.push_str(&replacement(hit));
        at = hit.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Names a list of things for a message: "a", "a and b", "a, b and c".
pub fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_by_key_and_comma_lists_are_trimmed() {
        let settings = vec![("a".to_string(), "1".to_string()), ("a".into(), "2".into())];
        assert_eq!(setting(&settings, "a"), Some("1"));
        assert_eq!(setting(&settings, "b"), None);
        assert_eq!(comma_list(" x, y ,,z ,"), vec!["x", "y", "z"]);
        assert!(comma_list(" , ").is_empty());
        assert_eq!((parse_bool("TRUE"), parse_bool("off"), parse_bool("maybe")), (Some(true), Some(false), None));
    }

    #[test]
    fn verdict_helpers_carry_status_code_and_message() {
        let Verdict::Deny(d) = misconfigured("limits", "`max_tokens` is not a number") else { panic!() };
        assert_eq!((d.status, d.code.as_str()), (500, "policy_misconfigured"));
        assert_eq!(d.message, "the limits policy is misconfigured: `max_tokens` is not a number");
        assert_eq!(deny(403, "x", "no"), Verdict::Deny(Denial { status: 403, message: "no".into(), code: "x".into() }));
        let m = metadata("p", Hooks::REQUEST | Hooks::STREAM, 64);
        assert_eq!((m.name.as_str(), m.version.as_str(), m.hold_back), ("p", "0.1.0", 64));
    }

    #[test]
    fn a_match_in_the_held_back_tail_waits_unless_it_is_the_last_call() {
        let text = "ab€cdef";
        assert!(!settled(text, 2, false, 5), "5 characters from the euro sign to the end");
        assert!(settled(text, 1, false, 5));
        assert!(settled(text, 2, true, 5));
        assert!(settled(text, 0, false, 0));
    }

    #[test]
    fn overlapping_hits_keep_the_first_detector_and_replacements_land_in_place() {
        let hits = disjoint(vec![
            Hit { start: 4, end: 8, kind: 0 },
            Hit { start: 0, end: 2, kind: 1 },
            Hit { start: 6, end: 10, kind: 1 },
        ]);
        assert_eq!(hits, vec![Hit { start: 0, end: 2, kind: 1 }, Hit { start: 4, end: 8, kind: 0 }]);
        assert_eq!(replace_hits("0123456789", &hits, |h| format!("<{}>", h.kind)), "<1>23<0>89");
        assert_eq!(replace_hits("abc", &[], |_| unreachable!()), "abc");
        assert_eq!(and_list(&["a".into(), "b".into(), "c".into()]), "a, b and c");
        assert_eq!(and_list(&["a".into()]), "a");
    }
}
