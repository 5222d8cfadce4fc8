//! The bot's commands as typed values: parsed from a chat message or a button's callback data,
//! listed for Telegram's command menu and `/help`.

/// What an operator asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Status,
    Health(Option<String>),
    Clear {
        source: Option<String>,
        model: Option<String>,
    },
    AffinityClear(Option<String>),
    StatsReset,
    Mode(String),
    Keys,
    Disable(String),
    Enable(String),
    /// Anything else that looked like a command: answered with a pointer to `/help`.
    Unknown(String),
}

/// (command, description) for `setMyCommands` and `/help`.
pub const MENU: &[(&str, &str)] = &[
    ("status", "requests, errors and tokens in the last hour; what is cooling"),
    ("health", "slot states with cooldown left: /health [source]"),
    ("clear", "clear cooldowns: /clear [source [model]]"),
    ("affinity_clear", "drop session-affinity bindings: /affinity_clear [source]"),
    ("stats_reset", "reset the smart scorer's statistics"),
    ("mode", "order within a tier: /mode smart|order|priority|cheapest"),
    ("keys", "gateway keys (masked) and their quota use"),
    ("disable", "stop routing to a source: /disable source"),
    ("enable", "route to a source again: /enable source"),
    ("help", "what the bot can do"),
];

/// Longest argument taken from a chat (a source or model name).
const MAX_ARG_CHARS: usize = 200;

/// Parses `/name@bot arg arg`; None when the text is not a command at all.
pub fn parse(text: &str) -> Option<Command> {
    let text = text.trim();
    let rest = text.strip_prefix('/')?;
    let mut words = rest.split_whitespace().take(4).map(|w| w.chars().take(MAX_ARG_CHARS).collect::<String>());
    let head = words.next()?;
    // In groups Telegram appends the bot's name: `/status@switchyard_bot`.
    let name = head.split('@').next().unwrap_or_default().to_ascii_lowercase();
    let first = words.next();
    let second = words.next();
    Some(match name.as_str() {
        "help" | "start" => Command::Help,
        "status" => Command::Status,
        "health" => Command::Health(first),
        "clear" => Command::Clear { source: first, model: second },
        "affinity_clear" => Command::AffinityClear(first),
        "stats_reset" => Command::StatsReset,
        "mode" => match first {
            Some(mode) => Command::Mode(mode.to_ascii_lowercase()),
            None => Command::Unknown("/mode needs smart, order, priority or cheapest".into()),
        },
        "keys" => Command::Keys,
        "disable" => first.map_or(Command::Unknown("/disable needs a source name".into()), Command::Disable),
        "enable" => first.map_or(Command::Unknown("/enable needs a source name".into()), Command::Enable),
        _ => Command::Unknown(format!("no command /{}", name.chars().take(40).collect::<String>())),
    })
}

impl Command {
    /// The name logged with the chat id (never its free text).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Help => "help",
            Command::Status => "status",
            Command::Health(_) => "health",
            Command::Clear { .. } => "clear",
            Command::AffinityClear(_) => "affinity_clear",
            Command::StatsReset => "stats_reset",
            Command::Mode(_) => "mode",
            Command::Keys => "keys",
            Command::Disable(_) => "disable",
            Command::Enable(_) => "enable",
            Command::Unknown(_) => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_arguments_and_a_bot_suffix() {
        assert_eq!(parse("/status"), Some(Command::Status));
        assert_eq!(parse("/status@switchyard_bot"), Some(Command::Status));
        assert_eq!(parse("  /health  groq "), Some(Command::Health(Some("groq".into()))));
        assert_eq!(
            parse("/clear groq llama-3"),
            Some(Command::Clear { source: Some("groq".into()), model: Some("llama-3".into()) })
        );
        assert_eq!(parse("/clear"), Some(Command::Clear { source: None, model: None }));
        assert_eq!(parse("/mode ORDER"), Some(Command::Mode("order".into())));
        assert_eq!(parse("/disable groq"), Some(Command::Disable("groq".into())));
        assert!(matches!(parse("/disable"), Some(Command::Unknown(_))));
        assert!(matches!(parse("/rm -rf"), Some(Command::Unknown(m)) if m == "no command /rm"));
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("/"), None);
    }

    #[test]
    fn hostile_text_is_bounded() {
        let long = format!("/health {}", "x".repeat(100_000));
        assert_eq!(parse(&long), Some(Command::Health(Some("x".repeat(MAX_ARG_CHARS)))));
    }
}
