//! Finds credentials in plain text: provider API keys and tokens by their documented prefixes,
//! PEM private key blocks and JWTs; each kind is a regex plus, where prefixes are loose, a check.

use policy_kit::Hit;
use regex::Regex;
use std::sync::LazyLock;

/// The kinds, in the order overlapping finds are settled (earlier wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    PrivateKey,
    Jwt,
    Anthropic,
    OpenAi,
    Stripe,
    Aws,
    GitHub,
    Slack,
    Google,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::PrivateKey,
        Kind::Jwt,
        Kind::Anthropic,
        Kind::OpenAi,
        Kind::Stripe,
        Kind::Aws,
        Kind::GitHub,
        Kind::Slack,
        Kind::Google,
    ];

    /// The name used in the `kinds` setting.
    pub fn name(self) -> &'static str {
        match self {
            Kind::PrivateKey => "private_key",
            Kind::Jwt => "jwt",
            Kind::Anthropic => "anthropic",
            Kind::OpenAi => "openai",
            Kind::Stripe => "stripe",
            Kind::Aws => "aws",
            Kind::GitHub => "github",
            Kind::Slack => "slack",
            Kind::Google => "google",
        }
    }

    /// How a denial names it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::PrivateKey => "a private key block",
            Kind::Jwt => "a JSON Web Token",
            Kind::Anthropic => "an Anthropic API key",
            Kind::OpenAi => "an OpenAI API key",
            Kind::Stripe => "a Stripe live key",
            Kind::Aws => "an AWS access key id",
            Kind::GitHub => "a GitHub token",
            Kind::Slack => "a Slack token",
            Kind::Google => "a Google API key",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(name))
    }

    fn pattern(self) -> &'static str {
        match self {
            // Up to the END line, or to the end of the text when it has not come (yet).
            Kind::PrivateKey => {
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)"
            }
            Kind::Jwt => r"(?-u:\b)eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
            Kind::Anthropic => r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{20,}",
            Kind::OpenAi => r"(?-u:\b)sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
            Kind::Stripe => r"(?-u:\b)[sr]k_live_[0-9A-Za-z]{10,}",
            Kind::Aws => r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
            Kind::GitHub => r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?-u:\b)",
            Kind::Slack => r"(?-u:\b)xox[abprs]-[A-Za-z0-9\-]{10,}",
            Kind::Google => r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}",
        }
    }

    /// A check beyond the pattern, for kinds whose prefix also starts ordinary words.
    fn plausible(self, found: &str) -> bool {
        match self {
            // `sk-` also starts slugs like `sk-learn-...`; a random key mixes cases and digits.
            Kind::OpenAi => {
                !found.starts_with("sk-ant-")
                    && found[3..].bytes().any(|b| b.is_ascii_digit())
                    && found[3..].bytes().any(|b| b.is_ascii_uppercase())
                    && found[3..].bytes().any(|b| b.is_ascii_lowercase())
            }
            _ => true,
        }
    }
}

// Boundaries are ASCII (`(?-u:\b)`): a Unicode one would send the lazy DFA back to the slow
// engine on any non-ASCII text, and every pattern here is ASCII anyway.
static PATTERNS: LazyLock<Vec<Regex>> =
    LazyLock::new(|| Kind::ALL.iter().map(|k| Regex::new(k.pattern()).expect("secret pattern")).collect());

/// A secret the previous stream call redacted at the very end of its text, continuing into the
/// newest delta (a token longer than what was held back).
static CONTINUED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[SECRET\](?:[A-Za-z0-9_\-]|\.[A-Za-z0-9_\-])+").expect("continuation pattern"));

pub const REPLACEMENT: &str = "[SECRET]";

/// Every find of `kinds` in `text`, disjoint and sorted; `Hit::kind` indexes [`Kind::ALL`].
pub fn find(text: &str, kinds: &[Kind]) -> Vec<Hit> {
    let mut hits = Vec::new();
    for (i, kind) in Kind::ALL.iter().enumerate() {
        if !kinds.contains(kind) {
            continue;
        }
        for m in PATTERNS[i].find_iter(text) {
            if kind.plausible(m.as_str()) {
                hits.push(Hit { start: m.start(), end: m.end(), kind: i });
            }
        }
    }
    policy_kit::disjoint(hits)
}

pub fn kind_of(hit: &Hit) -> Kind {
    Kind::ALL[hit.kind]
}

/// Whether a private key find has no END line yet.
pub fn is_open_block(text: &str, hit: &Hit) -> bool {
    kind_of(hit) == Kind::PrivateKey && !text[hit.start..hit.end].contains("-----END ")
}

/// Redaction markers glued to more token characters, for a stream's next call.
pub fn continuations(text: &str) -> Vec<Hit> {
    CONTINUED.find_iter(text).map(|m| Hit { start: m.start(), end: m.end(), kind: 0 }).collect()
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// Realistic-looking fakes, built at run time so that the source holds no secret-shaped text.
    pub fn sample(kind: Kind) -> String {
        let mix = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY3zA5bC7dE9fG2hJ4kL6m";
        match kind {
            Kind::PrivateKey => {
                format!(
                    "-----BEGIN RSA PRIVATE {k}-----\nMIIEow{mix}\n{mix}==\n-----END RSA PRIVATE {k}-----",
                    k = "KEY"
                )
            }
            Kind::Jwt => format!("ey{}.ey{}.{}", "JhbGciOiJIUzI1NiJ9", "JzdWIiOiIxMjM0NSJ9", &mix[..20]),
            Kind::Anthropic => format!("sk-{}-api03-{}", "ant", &mix[..40]),
            Kind::OpenAi => format!("sk-{}-{}", "proj", &mix[..48]),
            Kind::Stripe => format!("sk_{}_{}", "live", &mix[..24]),
            Kind::Aws => format!("AK{}", "IAIOSFODNN7EXAMPLE"),
            Kind::GitHub => format!("gh{}_{}", "p", &mix[..36]),
            Kind::Slack => format!("xo{}-1234567890-{}", "xb", &mix[..24]),
            Kind::Google => format!("AI{}{}", "za", &mix[..35]),
        }
    }

    #[test]
    fn every_kind_is_found_whole_and_named() {
        for kind in Kind::ALL {
            let secret = sample(kind);
            let text = format!("here: {secret} (done)");
            let hits = find(&text, &Kind::ALL);
            assert_eq!(hits.len(), 1, "{kind:?}: {hits:?}");
            assert_eq!((kind_of(&hits[0]), &text[hits[0].start..hits[0].end]), (kind, secret.as_str()));
        }
        assert_eq!(Kind::from_name("AWS"), Some(Kind::Aws));
        assert_eq!(Kind::from_name("ssh"), None);
    }

    #[test]
    fn other_prefixed_tokens_are_found_too() {
        for token in [
            format!("github_{}_{}", "pat", "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"),
            format!("gh{}_{}", "s", "a".repeat(36)),
            format!("AS{}", "IAQWERTYUIOPASDFGH"),
            format!("rk_{}_{}", "live", "abcDEF1234567890"),
            format!("xo{}-{}", "xp", "1234-5678-abcdef"),
            format!("sk-{}", "T3BlbkFJ0123456789abcdefXYZ"),
        ] {
            assert_eq!(find(&format!("'{token}'"), &Kind::ALL).len(), 1, "{token}");
        }
    }

    #[test]
    fn lookalikes_are_not_secrets() {
        for text in [
            "use sk-learn-compatible-estimators here",
            "the task-force-of-twenty-people-met",
            "AKIA is a prefix; AKIA123 is short",
            "ghp_short",
            "eyJhbGciOi is only a header",
            "a.b.c",
            "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----",
            "-----BEGIN CERTIFICATE-----",
            "sk_test_abcdefghijklmnop",
        ] {
            assert!(find(text, &Kind::ALL).is_empty(), "{text}");
        }
    }

    #[test]
    fn an_anthropic_key_is_not_reported_as_an_openai_one_and_kinds_narrow_the_search() {
        let text = sample(Kind::Anthropic);
        assert_eq!(kind_of(&find(&text, &Kind::ALL)[0]), Kind::Anthropic);
        assert!(find(&text, &[Kind::OpenAi]).is_empty());
        let both = format!("{} {}", sample(Kind::Aws), sample(Kind::GitHub));
        assert_eq!(find(&both, &[Kind::GitHub]).len(), 1);
    }

    #[test]
    fn a_private_key_block_without_its_end_runs_to_the_end_of_the_text() {
        let block = sample(Kind::PrivateKey);
        let cut = &block[..60];
        let hits = find(cut, &Kind::ALL);
        assert_eq!((hits[0].start, hits[0].end), (0, cut.len()));
        assert!(is_open_block(cut, &hits[0]));
        let whole = find(&block, &Kind::ALL);
        assert!(!is_open_block(&block, &whole[0]));
        let pgp = "-----BEGIN PGP PRIVATE KEY BLOCK-----\nxyz\n-----END PGP PRIVATE KEY BLOCK-----";
        assert_eq!(find(pgp, &Kind::ALL)[0].end, pgp.len());
    }

    #[test]
    fn a_redaction_glued_to_more_token_is_a_continuation() {
        let c = continuations("see [SECRET]abc.def_ghi and [SECRET]. Then [SECRET] x");
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].start, c[0].end), (4, 23));
    }
}
