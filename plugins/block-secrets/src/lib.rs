//! The `block-secrets` policy: refuses (or redacts) credentials in requests, answers and
//! streams; settings, hooks and messages here, the detectors in detect.

mod detect;

use detect::{Kind, REPLACEMENT, continuations, find, is_open_block, kind_of};
use policy_kit::{
    Hit, Hooks, Place, Verdict, comma_list, deny, misconfigured, rewrite_answer_text, rewrite_request_text, setting,
    texts_of_answer, texts_of_request,
};

/// Long enough for every key and token here to be seen whole across stream chunks (a PEM
/// block is longer, and is caught by its BEGIN line).
const HOLD_BACK: u32 = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Deny,
    Redact,
}

#[derive(Debug)]
struct Config {
    action: Action,
    kinds: Vec<Kind>,
}

fn config(settings: &[(String, String)]) -> Result<Config, String> {
    let action = match setting(settings, "action").map(str::trim) {
        None | Some("deny") => Action::Deny,
        Some("redact") => Action::Redact,
        Some(other) => return Err(format!("`action` is `{other}`; it must be `deny` or `redact`")),
    };
    let kinds = match setting(settings, "kinds").map(comma_list) {
        None => Kind::ALL.to_vec(),
        Some(names) if names.is_empty() => Kind::ALL.to_vec(),
        Some(names) => names
            .iter()
            .map(|n| {
                Kind::from_name(n).ok_or_else(|| {
                    let known: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                    format!("`kinds` names `{n}`; known are {}", known.join(", "))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Config { action, kinds })
}

/// The refusal naming each kind found and where (`places` may be empty), never a value.
fn refusal(what: &str, found: &[(Kind, Vec<String>)]) -> Verdict {
    let named: Vec<String> = found
        .iter()
        .map(|(kind, places)| {
            if places.is_empty() {
                kind.label().to_string()
            } else {
                format!("{} ({})", kind.label(), places.join(", "))
            }
        })
        .collect();
    let tail = if what == "request" { "remove it or ask an operator" } else { "it was withheld" };
    deny(400, "secret_detected", format!("the {what} carries what looks like {}; {tail}", policy_kit::and_list(&named)))
}

/// Adds each find's kind and place to `found`, first-seen order, each place once.
fn note(found: &mut Vec<(Kind, Vec<String>)>, kind: Kind, place: Option<Place>) {
    let i = match found.iter().position(|(k, _)| *k == kind) {
        Some(i) => i,
        None => {
            found.push((kind, Vec::new()));
            found.len() - 1
        }
    };
    if let Some(place) = place.map(|p| p.to_string())
        && !found[i].1.contains(&place)
    {
        found[i].1.push(place);
    }
}

fn redact(text: &str, hits: &[Hit]) -> String {
    policy_kit::replace_hits(text, hits, |_| REPLACEMENT.to_string())
}

fn check_whole(settings: &[(String, String)], body: &str, is_request: bool) -> Verdict {
    let config = match config(settings) {
        Ok(c) => c,
        Err(problem) => return misconfigured("block-secrets", &problem),
    };
    let redactor = |t: &str| {
        let hits = find(t, &config.kinds);
        (!hits.is_empty()).then(|| redact(t, &hits))
    };
    match config.action {
        Action::Redact => {
            let rewritten =
                if is_request { rewrite_request_text(body, redactor) } else { rewrite_answer_text(body, redactor) };
            match rewritten {
                Ok(Some(body)) => Verdict::Rewrite(body),
                _ => Verdict::Allow,
            }
        }
        Action::Deny => {
            let texts = if is_request { texts_of_request(body) } else { texts_of_answer(body) };
            let Ok(texts) = texts else { return Verdict::Allow };
            let mut found = Vec::new();
            for text in &texts {
                for hit in find(&text.text, &config.kinds) {
                    note(&mut found, kind_of(&hit), Some(text.place));
                }
            }
            if found.is_empty() {
                Verdict::Allow
            } else {
                refusal(if is_request { "request" } else { "answer" }, &found)
            }
        }
    }
}

fn check_stream(settings: &[(String, String)], text: &str, last: bool) -> Verdict {
    let config = match config(settings) {
        Ok(c) => c,
        Err(problem) => return misconfigured("block-secrets", &problem),
    };
    let hits: Vec<Hit> =
        find(text, &config.kinds).into_iter().filter(|h| policy_kit::settled(text, h.start, last, HOLD_BACK)).collect();
    match config.action {
        Action::Deny => {
            let mut found = Vec::new();
            for hit in &hits {
                note(&mut found, kind_of(hit), None);
            }
            if found.is_empty() { Verdict::Allow } else { refusal("answer", &found) }
        }
        Action::Redact => {
            // The rest of an open key block comes in later calls, which cannot tell it from
            // ordinary text: the only safe end is to stop the answer.
            if !last && let Some(open) = hits.iter().find(|h| is_open_block(text, h)) {
                return refusal("answer", &[(kind_of(open), Vec::new())]);
            }
            let mut all = continuations(text);
            all.extend(hits);
            let all = policy_kit::disjoint(all);
            if all.is_empty() { Verdict::Allow } else { Verdict::Rewrite(redact(text, &all)) }
        }
    }
}

fn check_request(settings: &[(String, String)], request: &str) -> Verdict {
    check_whole(settings, request, true)
}

fn check_answer(settings: &[(String, String)], answer: &str) -> Verdict {
    check_whole(settings, answer, false)
}

policy_kit::text_policy!(BlockSecrets, "block-secrets", Hooks::REQUEST | Hooks::ANSWER | Hooks::STREAM, HOLD_BACK);

#[cfg(test)]
mod tests {
    use super::detect::tests::sample;
    use super::*;
    use policy_kit::Guest;
    use policy_kit::testing::{denial, settings};

    fn request(aws: &str, gh: &str) -> String {
        format!(
            r#"{{"model":"m","messages":[{{"role":"system","content":"hi"}},{{"role":"user","content":"my key {aws}"}},{{"role":"assistant","content":null,"tool_calls":[{{"function":{{"name":"f","arguments":"{{\"t\":\"{gh}\"}}"}}}}]}}]}}"#
        )
    }

    #[test]
    fn a_request_with_a_secret_is_refused_naming_kind_and_place_but_not_the_value() {
        let (aws, gh) = (sample(Kind::Aws), sample(Kind::GitHub));
        let (status, code, message) = denial(check_whole(&[], &request(&aws, &gh), true));
        assert_eq!((status, code.as_str()), (400, "secret_detected"));
        assert_eq!(
            message,
            "the request carries what looks like an AWS access key id (message 2) and a GitHub token (tool-call arguments in message 3); remove it or ask an operator"
        );
        assert!(!message.contains(&aws) && !message.contains(&gh));
        assert_eq!(check_whole(&[], &request("nothing", "here"), true), Verdict::Allow);
        assert_eq!(check_whole(&[], "not json", true), Verdict::Allow);
    }

    #[test]
    fn redact_replaces_each_secret_and_kinds_restrict() {
        let (aws, gh) = (sample(Kind::Aws), sample(Kind::GitHub));
        let s = settings(&[("action", "redact")]);
        assert_eq!(check_whole(&s, &request(&aws, &gh), true), Verdict::Rewrite(request("[SECRET]", "[SECRET]")));
        let s = settings(&[("action", "redact"), ("kinds", "github")]);
        assert_eq!(check_whole(&s, &request(&aws, &gh), true), Verdict::Rewrite(request(&aws, "[SECRET]")));
        let (_, code, _) = denial(check_whole(&settings(&[("kinds", "aws, ssh")]), "{}", true));
        assert_eq!(code, "policy_misconfigured");
        let (_, code, _) = denial(check_whole(&settings(&[("action", "warn")]), "{}", true));
        assert_eq!(code, "policy_misconfigured");
    }

    #[test]
    fn answers_are_refused_or_redacted() {
        let jwt = sample(Kind::Jwt);
        let answer = format!(
            r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"token {jwt}"}},"finish_reason":"stop"}}]}}"#
        );
        let (_, _, message) = denial(check_whole(&[], &answer, false));
        assert_eq!(message, "the answer carries what looks like a JSON Web Token (choice 1); it was withheld");
        let s = settings(&[("action", "redact")]);
        assert_eq!(check_whole(&s, &answer, false), Verdict::Rewrite(answer.replace(&jwt, "[SECRET]")));
    }

    #[test]
    fn streams_wait_for_a_find_in_the_tail_then_deny_or_redact() {
        let key = sample(Kind::Stripe);
        let padding = " and more".repeat(20);
        assert_eq!(check_stream(&[], &format!("key {key}"), false), Verdict::Allow, "may still grow");
        let (_, code, message) = denial(check_stream(&[], &format!("key {key}"), true));
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("secret_detected", "the answer carries what looks like a Stripe live key; it was withheld")
        );
        let (_, code, _) = denial(check_stream(&[], &format!("key {key}{padding}"), false));
        assert_eq!(code, "secret_detected");
        let s = settings(&[("action", "redact")]);
        assert_eq!(
            check_stream(&s, &format!("key {key}{padding}"), false),
            Verdict::Rewrite(format!("key [SECRET]{padding}"))
        );
    }

    #[test]
    fn a_long_token_redacted_at_the_end_of_one_call_is_finished_in_the_next() {
        let s = settings(&[("action", "redact")]);
        let jwt = format!("{}{}", sample(Kind::Jwt), "x".repeat(200));
        let (head, tail) = jwt.split_at(150);
        let Verdict::Rewrite(first) = check_stream(&s, &format!("t {head}"), false) else { panic!() };
        assert_eq!(first, "t [SECRET]");
        assert_eq!(check_stream(&s, &format!("{first}{tail} done"), true), Verdict::Rewrite("t [SECRET] done".into()));
    }

    #[test]
    fn an_open_key_block_ends_a_redacting_stream_but_a_whole_one_is_redacted() {
        let s = settings(&[("action", "redact")]);
        let block = sample(Kind::PrivateKey);
        let (_, code, message) = denial(check_stream(&s, &block[..block.len() - 30], false));
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("secret_detected", "the answer carries what looks like a private key block; it was withheld")
        );
        assert_eq!(check_stream(&s, &format!("{block} ok"), true), Verdict::Rewrite("[SECRET] ok".into()));
    }

    #[test]
    fn describe_declares_the_hooks_and_hold_back() {
        let m = BlockSecrets::describe();
        assert_eq!(
            (m.name.as_str(), m.hooks, m.hold_back),
            ("block-secrets", Hooks::REQUEST | Hooks::ANSWER | Hooks::STREAM, 128)
        );
    }
}
