//! `${VAR}` and `${VAR:-default}` expansion in config strings, with the lookup injected so it
//! is testable without touching the process environment.

/// Expands every `${...}` in `text`. `$${` is a literal `${`. Unset variables without a
/// default are reported by name.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        if rest[..start].ends_with('$') {
            out.push_str(&rest[..start - 1]);
            out.push_str("${");
            rest = &rest[start + 2..];
            continue;
        }
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(ExpandError::Unclosed)?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ExpandError::BadName(name.to_string()));
        }
        match lookup(name).filter(|v| !v.is_empty()).or_else(|| default.map(str::to_string)) {
            Some(value) => out.push_str(&value),
            None => return Err(ExpandError::Unset(name.to_string())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("environment variable {0} is not set")]
    Unset(String),
    #[error("`${{` without a closing `}}`")]
    Unclosed,
    #[error("`${{{0}}}` is not a variable name (letters, digits, _)")]
    BadName(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "KEY" => Some("sk-123".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_set_variables_and_defaults() {
        assert_eq!(expand("${KEY}", &env).unwrap(), "sk-123");
        assert_eq!(expand("Bearer ${KEY}!", &env).unwrap(), "Bearer sk-123!");
        assert_eq!(expand("${MISSING:-fallback}", &env).unwrap(), "fallback");
        assert_eq!(expand("${EMPTY:-fallback}", &env).unwrap(), "fallback");
        assert_eq!(expand("${MISSING:-}", &env).unwrap(), "");
        assert_eq!(expand("plain", &env).unwrap(), "plain");
        assert_eq!(expand("$${KEY}", &env).unwrap(), "${KEY}");
    }

    #[test]
    fn reports_what_is_wrong() {
        assert_eq!(expand("${MISSING}", &env), Err(ExpandError::Unset("MISSING".into())));
        assert_eq!(expand("${KEY", &env), Err(ExpandError::Unclosed));
        assert_eq!(expand("${not valid}", &env), Err(ExpandError::BadName("not valid".into())));
    }
}
