//! Text from clients, upstreams and guests made safe to log: control characters (a `\n` that
//! would forge a log line, ANSI escapes) are written as escapes, in every field of every line.

use std::fmt;

use tracing_subscriber::field::MakeExt;

/// Displays untrusted text with control characters escaped (`\n`, `\u{1b}`...).
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

/// The log's field formatter: every field (the message included) goes through [`Escaped`],
/// so no value can start a line of its own.
pub fn fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = format!("{value:?}");
        match field.name() {
            "message" => write!(w, "{}", Escaped(&text)),
            name => write!(w, "{name}={}", Escaped(&text)),
        }
    })
    .delimited(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_cannot_forge_lines_or_colours() {
        let shown = Escaped("gpt\nINFO forged line\r\u{1b}[31mred").to_string();
        assert_eq!(shown, "gpt\\nINFO forged line\\r\\u{1b}[31mred");
        assert!(!shown.contains('\n'));
        assert_eq!(Escaped("plain é 模型").to_string(), "plain é 模型");
    }
}
