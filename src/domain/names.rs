//! Names that carry meaning through the gateway, and `Secret`, which never prints itself.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        /// Shared text: names are cloned into every request's slots, accounts and log rows.
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(std::sync::Arc<str>);

        impl $name {
            pub fn new(name: impl Into<String>) -> Self {
                $name(std::sync::Arc::from(name.into()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// A source's `name`: one upstream account/endpoint.
    SourceName
);
name_type!(
    /// A source's `adapter`: a built-in adapter or a file stem in `adapter_dir`.
    AdapterName
);
name_type!(
    /// A gateway key's `name` (never the key itself).
    KeyName
);
name_type!(
    /// A route group: a key sees the routes of its group.
    GroupName
);
name_type!(
    /// A policy's `name` under `policies:`, as keys, routes and sources attach it.
    PolicyName
);

impl Default for GroupName {
    fn default() -> Self {
        GroupName::new("default")
    }
}

/// An API key or token. Debug and Display show only a masked form.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The real value: only for building upstream requests and comparing keys.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `sk-…wxyz`: enough to recognise a key, never enough to use it.
    pub fn masked(&self) -> String {
        mask(&self.0)
    }

    /// `text` (an upstream's error message, say) with the secret masked wherever it shows:
    /// whole, or any run of 12 or more of its characters (a prefix, a suffix, a middle part,
    /// as upstreams echo keys "sk-proj-abc…" half masked themselves). Secrets shorter than 4
    /// characters are not looked for: masking them would garble ordinary words.
    pub fn scrub(&self, text: &str) -> String {
        const RUN: usize = 12;
        let secret = self.0.as_bytes();
        if secret.len() < 4 {
            return text.to_string();
        }
        let bytes = text.as_bytes();
        let (mut out, mut copied, mut at) = (String::with_capacity(text.len()), 0, 0);
        while at < bytes.len() {
            // The longest run of the secret that starts here.
            let longest = (0..secret.len())
                .map(|from| bytes[at..].iter().zip(&secret[from..]).take_while(|(a, b)| a == b).count())
                .max()
                .unwrap_or(0);
            if longest >= RUN.min(secret.len()) && text.is_char_boundary(at) && text.is_char_boundary(at + longest) {
                out.push_str(&text[copied..at]);
                out.push_str(&self.masked());
                at += longest;
                copied = at;
            } else {
                at += 1;
            }
        }
        out.push_str(&text[copied..]);
        out
    }
}

/// Masks any secret-looking string: a short prefix and the last four characters survive.
pub fn mask(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    if chars.is_empty() {
        return String::new();
    }
    if chars.len() <= 8 {
        return "…".to_string();
    }
    let head: String = chars.iter().take(3).collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail}")
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({})", self.masked())
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

/// For the one place a secret is written out: the runtime file, which holds runtime sources'
/// upstream keys (it lives in `data_dir`, like the state database). Never for API answers.
pub fn expose_secret<S: serde::Serializer>(secret: &Secret, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&secret.0)
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

/// The longest model name a client may send or an upstream may list: names end up in log
/// rows, metric labels and the WebUI, so one request cannot make any of them large.
pub const MAX_MODEL_NAME_BYTES: usize = 256;

/// Why `name` cannot be a model name an upstream lists (a detected model): too long, empty, a
/// `/` (it would read as `source/model`), whitespace, or a control, bidirectional, zero-width or
/// other invisible formatting character (it would rewrite what an operator reads in the WebUI,
/// a log line or a chat, or pass for another name that looks the same).
pub fn listed_model_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("empty");
    }
    if name.len() > MAX_MODEL_NAME_BYTES {
        return Some("longer than 256 bytes");
    }
    if name.contains('/') {
        return Some("contains `/`");
    }
    // Unicode's format characters a name may hide behind (Cf), and the line separators.
    let invisible = |c: char| {
        matches!(c, '\u{00ad}' | '\u{061c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e0000}'..='\u{e007f}')
    };
    if name.chars().any(|c| c.is_control() || c.is_whitespace() || invisible(c)) {
        return Some("contains whitespace, or a control, bidirectional or invisible formatting character");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_masks_a_secret_whole_or_in_part_wherever_it_shows() {
        let key = Secret::new("sk-proj-0123456789abcdefXYZ");
        let said = key.scrub("Incorrect API key provided: sk-proj-0123456789abcdefXYZ.");
        assert_eq!(said, "Incorrect API key provided: sk-…fXYZ.");
        let said = key.scrub("key sk-proj-0123****fXYZ and 3456789abcde, fine: sk-proj-012");
        assert!(!said.contains("sk-proj-0123*") && !said.contains("456789abc"), "{said}");
        assert!(said.ends_with("fine: sk-proj-012"), "runs under 12 characters stay: {said}");
        assert_eq!(Secret::new("abc").scrub("abc abc"), "abc abc");
        assert_eq!(Secret::new("ab12").scrub("x ab12 y"), "x … y");
        assert_eq!(Secret::new("sk-é-0123456789").scrub("é-0123456789 ü"), "sk-…6789 ü");
    }

    #[test]
    fn secrets_never_print_in_full() {
        let secret = Secret::new("sk-proj-abcdefghijklmnop");
        assert_eq!(secret.masked(), "sk-…mnop");
        assert_eq!(format!("{secret:?}"), "Secret(sk-…mnop)");
        assert!(!format!("{secret}").contains("abcdefgh"));
        assert_eq!(Secret::new("short").masked(), "…");
        assert_eq!(Secret::new("").masked(), "");
    }
}
