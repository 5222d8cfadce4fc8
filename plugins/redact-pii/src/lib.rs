//! The `redact-pii` policy: finds personal data (emails, phones, cards, IBANs) in requests,
//! answers and streams, and redacts it or refuses; settings and hooks here, matching in detect.

mod detect;

use detect::{Entity, entity_of, find};
use policy_kit::{
    Hooks, Verdict, comma_list, deny, misconfigured, rewrite_answer_text, rewrite_request_text, setting,
    texts_of_answer, texts_of_request,
};

/// Long enough for any entity found here to be seen whole across stream chunks.
const HOLD_BACK: u32 = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    Redact,
    Deny,
}

#[derive(Debug)]
struct Config {
    entities: Vec<Entity>,
    replacement: String,
    action: Action,
}

fn config(settings: &[(String, String)]) -> Result<Config, String> {
    let entities = match setting(settings, "entities").map(comma_list) {
        None => Entity::ALL.to_vec(),
        Some(names) if names.is_empty() => Entity::ALL.to_vec(),
        Some(names) => names
            .iter()
            .map(|n| {
                Entity::from_name(n)
                    .ok_or_else(|| format!("`entities` names `{n}`; known are email, phone, card and iban"))
            })
            .collect::<Result<_, _>>()?,
    };
    let action = match setting(settings, "action").map(str::trim) {
        None | Some("redact") => Action::Redact,
        Some("deny") => Action::Deny,
        Some(other) => return Err(format!("`action` is `{other}`; it must be `redact` or `deny`")),
    };
    let replacement = setting(settings, "replacement").unwrap_or("[{entity}]").to_string();
    Ok(Config { entities, replacement, action })
}

impl Config {
    /// `text` with every find replaced, or `None` when there is none (or none settled yet).
    fn redact(&self, text: &str, keep: impl Fn(usize) -> bool) -> Option<String> {
        let hits: Vec<_> = find(text, &self.entities).into_iter().filter(|h| keep(h.start)).collect();
        if hits.is_empty() {
            return None;
        }
        let replaced = policy_kit::replace_hits(text, &hits, |h| {
            self.replacement.replace("{entity}", &entity_of(h).name().to_ascii_uppercase())
        });
        Some(replaced)
    }

    /// The kinds found in `texts`, in a stable order; never the values.
    fn kinds_in<'a>(&self, texts: impl IntoIterator<Item = &'a str>) -> Vec<Entity> {
        let mut kinds: Vec<Entity> = Vec::new();
        for text in texts {
            for hit in find(text, &self.entities) {
                let entity = entity_of(&hit);
                if !kinds.contains(&entity) {
                    kinds.push(entity);
                }
            }
        }
        kinds.sort_by_key(|e| Entity::ALL.iter().position(|a| a == e));
        kinds
    }
}

fn refusal(what: &str, kinds: &[Entity]) -> Verdict {
    let labels: Vec<String> = kinds.iter().map(|k| k.label().to_string()).collect();
    let tail = if what == "request" { "remove it or ask an operator" } else { "it was withheld" };
    deny(400, "pii_detected", format!("the {what} carries personal data ({}); {tail}", policy_kit::and_list(&labels)))
}

fn check_request(settings: &[(String, String)], request: &str) -> Verdict {
    let config = match config(settings) {
        Ok(c) => c,
        Err(problem) => return misconfigured("redact-pii", &problem),
    };
    match config.action {
        Action::Redact => match rewrite_request_text(request, |t| config.redact(t, |_| true)) {
            Ok(Some(rewritten)) => Verdict::Rewrite(rewritten),
            _ => Verdict::Allow,
        },
        Action::Deny => {
            let Ok(texts) = texts_of_request(request) else { return Verdict::Allow };
            let kinds = config.kinds_in(texts.iter().map(|t| t.text.as_str()));
            if kinds.is_empty() { Verdict::Allow } else { refusal("request", &kinds) }
        }
    }
}

fn check_answer(settings: &[(String, String)], answer: &str) -> Verdict {
    let config = match config(settings) {
        Ok(c) => c,
        Err(problem) => return misconfigured("redact-pii", &problem),
    };
    match config.action {
        Action::Redact => match rewrite_answer_text(answer, |t| config.redact(t, |_| true)) {
            Ok(Some(rewritten)) => Verdict::Rewrite(rewritten),
            _ => Verdict::Allow,
        },
        Action::Deny => {
            let Ok(texts) = texts_of_answer(answer) else { return Verdict::Allow };
            let kinds = config.kinds_in(texts.iter().map(|t| t.text.as_str()));
            if kinds.is_empty() { Verdict::Allow } else { refusal("answer", &kinds) }
        }
    }
}

fn check_stream(settings: &[(String, String)], text: &str, last: bool) -> Verdict {
    let config = match config(settings) {
        Ok(c) => c,
        Err(problem) => return misconfigured("redact-pii", &problem),
    };
    let settled = |start: usize| policy_kit::settled(text, start, last, HOLD_BACK);
    match config.action {
        Action::Redact => config.redact(text, settled).map_or(Verdict::Allow, Verdict::Rewrite),
        Action::Deny => {
            let mut kinds: Vec<Entity> = Vec::new();
            for hit in find(text, &config.entities).into_iter().filter(|h| settled(h.start)) {
                if !kinds.contains(&entity_of(&hit)) {
                    kinds.push(entity_of(&hit));
                }
            }
            if kinds.is_empty() { Verdict::Allow } else { refusal("answer", &kinds) }
        }
    }
}

policy_kit::text_policy!(RedactPii, "redact-pii", Hooks::REQUEST | Hooks::ANSWER | Hooks::STREAM, HOLD_BACK);

#[cfg(test)]
mod tests {
    use super::*;
    use policy_kit::Guest;
    use policy_kit::testing::{denial, settings};

    const REQUEST: &str = r#"{"model":"m","messages":[{"role":"user","content":"I am a@b.io, call +1 555 123 4567"},{"role":"user","content":[{"type":"text","text":"card 4111 1111 1111 1111"}]}],"max_tokens":5}"#;

    #[test]
    fn requests_are_redacted_with_the_entity_name_by_default() {
        let Verdict::Rewrite(out) = check_request(&[], REQUEST) else { panic!() };
        assert_eq!(
            out,
            r#"{"model":"m","messages":[{"role":"user","content":"I am [EMAIL], call [PHONE]"},{"role":"user","content":[{"type":"text","text":"card [CARD]"}]}],"max_tokens":5}"#
        );
        assert_eq!(check_request(&[], r#"{"messages":[{"role":"user","content":"hello in 2024"}]}"#), Verdict::Allow);
        assert_eq!(check_request(&[], "not json"), Verdict::Allow);
    }

    #[test]
    fn the_entities_and_replacement_settings_narrow_and_shape_it() {
        let s = settings(&[("entities", "email, card"), ("replacement", "<{entity} removed>")]);
        let Verdict::Rewrite(out) = check_request(&s, REQUEST) else { panic!() };
        assert!(out.contains("I am <EMAIL removed>, call +1 555 123 4567"), "{out}");
        assert!(out.contains("card <CARD removed>"));
    }

    #[test]
    fn deny_names_the_kinds_never_the_values() {
        let s = settings(&[("action", "deny")]);
        let (status, code, message) = denial(check_request(&s, REQUEST));
        assert_eq!((status, code.as_str()), (400, "pii_detected"));
        assert_eq!(
            message,
            "the request carries personal data (an email address, a phone number and a payment card number); remove it or ask an operator"
        );
        assert!(!message.contains("a@b.io"));
        let answer = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"IBAN DE89370400440532013000"},"finish_reason":"stop"}]}"#;
        let (_, _, message) = denial(check_answer(&s, answer));
        assert_eq!(message, "the answer carries personal data (an IBAN); it was withheld");
        assert_eq!(check_answer(&[], answer), Verdict::Rewrite(answer.replace("DE89370400440532013000", "[IBAN]")));
    }

    #[test]
    fn bad_settings_are_an_operators_mistake() {
        for s in [settings(&[("entities", "email, ssn")]), settings(&[("action", "block")])] {
            let (status, code, _) = denial(check_request(&s, REQUEST));
            assert_eq!((status, code.as_str()), (500, "policy_misconfigured"));
        }
    }

    #[test]
    fn streams_leave_a_find_in_the_held_back_tail_for_later() {
        let padding = "x ".repeat(40);
        // The email starts within the last 64 characters: it might still grow, so wait.
        assert_eq!(check_stream(&[], "mail a@b.io", false), Verdict::Allow);
        assert_eq!(check_stream(&[], "mail a@b.io", true), Verdict::Rewrite("mail [EMAIL]".into()));
        let text = format!("mail a@b.io {padding}");
        assert_eq!(check_stream(&[], &text, false), Verdict::Rewrite(format!("mail [EMAIL] {padding}")));
        let (_, code, _) = denial(check_stream(&settings(&[("action", "deny")]), &text, false));
        assert_eq!(code, "pii_detected");
        assert_eq!(check_stream(&settings(&[("action", "deny")]), "mail a@b.io", false), Verdict::Allow);
    }

    #[test]
    fn describe_declares_the_hooks_and_hold_back() {
        let m = RedactPii::describe();
        assert_eq!(
            (m.name.as_str(), m.hooks, m.hold_back),
            ("redact-pii", Hooks::REQUEST | Hooks::ANSWER | Hooks::STREAM, 64)
        );
    }
}
