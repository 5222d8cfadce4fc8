//! Runs a command through the admin API, in-process (the same routes, checks and logs as an
//! HTTP admin client), and words the answer for a chat.

use axum::http::Method;
use serde_json::{Value, json};

use super::commands::{Command, MENU};
use crate::server::InProcess;

/// Lines of a list shown in one message; the rest are counted.
const MAX_LINES: usize = 40;

/// Runs `command`; the reply text, and buttons for the answers that offer them.
pub async fn run(admin: &InProcess, command: &Command) -> (String, Option<Value>) {
    match command {
        Command::Help => (help(), Some(super::keyboard())),
        Command::Status => (status(admin).await, Some(super::keyboard())),
        Command::Health(source) => (health(admin, source.as_deref()).await, None),
        Command::Clear { source, model } => {
            let (status, answer) =
                admin.call(Method::POST, "/cooldowns/clear", Some(json!({"source": source, "model": model}))).await;
            (done(status, &answer, |a| format!("Cleared {} cooldowns{}.", a["cleared"], scope(source, model))), None)
        }
        Command::AffinityClear(source) => {
            let (status, answer) = admin.call(Method::POST, "/affinity/clear", Some(json!({"source": source}))).await;
            (
                done(status, &answer, |a| {
                    format!("Dropped {} affinity bindings{}.", a["cleared"], scope(source, &None))
                }),
                None,
            )
        }
        Command::StatsReset => {
            let (status, answer) = admin.call(Method::POST, "/stats/reset", Some(json!({}))).await;
            (done(status, &answer, |a| format!("Reset the scorer's statistics of {} slots.", a["reset"])), None)
        }
        Command::Mode(mode) => {
            let (status, answer) = admin.call(Method::PUT, "/settings", Some(json!({"channel_selection": mode}))).await;
            (
                done(status, &answer, |a| {
                    format!("Order within a tier is now {}.", a["channel_selection"].as_str().unwrap_or(mode))
                }),
                None,
            )
        }
        Command::Keys => (keys(admin).await, None),
        Command::Disable(source) => (switch(admin, source, false).await, None),
        Command::Enable(source) => (switch(admin, source, true).await, None),
        Command::Unknown(why) => (format!("{why}. /help lists the commands."), None),
    }
}

fn help() -> String {
    let mut text = String::from("Switchyard operator bot. Commands:\n");
    for (command, description) in MENU {
        text.push_str(&format!("/{command} — {description}\n"));
    }
    text
}

/// The answer, or the admin API's error in words.
fn done(status: u16, answer: &Value, words: impl Fn(&Value) -> String) -> String {
    if (200..300).contains(&status) {
        words(answer)
    } else {
        let message = answer["error"]["message"].as_str().unwrap_or("the admin API refused it");
        format!("Not done ({status}): {message}")
    }
}

fn scope(source: &Option<String>, model: &Option<String>) -> String {
    match (source, model) {
        (None, None) => String::new(),
        (Some(s), None) => format!(" of {s}"),
        (None, Some(m)) => format!(" of model {m}"),
        (Some(s), Some(m)) => format!(" of {s}/{m}"),
    }
}

async fn status(admin: &InProcess) -> String {
    let Some(series) = admin.get("/stats/series").await else { return "Stats are not available now.".into() };
    let sum = |field: &str| -> u64 {
        series["buckets"].as_array().into_iter().flatten().map(|b| b[field].as_u64().unwrap_or(0)).sum()
    };
    let (requests, errors, tokens_in, tokens_out) =
        (sum("requests"), sum("errors"), sum("tokens_in"), sum("tokens_out"));
    let mut text = format!(
        "Last hour: {requests} requests, {errors} errors, {} tokens ({tokens_in} in, {tokens_out} out).\n",
        tokens_in + tokens_out
    );
    let health = admin.get("/health").await.unwrap_or(Value::Null);
    let now = health["now_ms"].as_u64().unwrap_or(0);
    let unwell: Vec<String> = slots(&health).filter(|s| s["state"] != "healthy").map(|s| slot_line(s, now)).collect();
    if unwell.is_empty() {
        text.push_str("Nothing is cooling.");
    } else {
        text.push_str(&format!("Not healthy ({}):\n", unwell.len()));
        text.push_str(&bounded_lines(unwell));
    }
    text
}

async fn health(admin: &InProcess, source: Option<&str>) -> String {
    let Some(health) = admin.get("/health").await else { return "Health is not available now.".into() };
    let now = health["now_ms"].as_u64().unwrap_or(0);
    let lines: Vec<String> =
        slots(&health).filter(|s| source.is_none_or(|name| s["source"] == name)).map(|s| slot_line(s, now)).collect();
    match (lines.is_empty(), source) {
        (true, Some(name)) => format!("No source named {name} (or it serves no model)."),
        (true, None) => "No sources are configured.".into(),
        (false, _) => bounded_lines(lines),
    }
}

fn slots(health: &Value) -> impl Iterator<Item = &Value> {
    health["slots"].as_array().into_iter().flatten()
}

/// `source/model: state`, with what is left of a cooldown and the failures behind it.
fn slot_line(slot: &Value, now: u64) -> String {
    let mut line = format!(
        "{}/{}: {}",
        slot["source"].as_str().unwrap_or("?"),
        slot["model"].as_str().unwrap_or("?"),
        slot["state"].as_str().unwrap_or("?")
    );
    if let Some(until) = slot["recovers_at_ms"].as_u64() {
        line.push_str(&format!(", {} s left", until.saturating_sub(now).div_ceil(1000)));
    }
    if let Some(failures) = slot["failures"].as_u64().filter(|f| *f > 0) {
        line.push_str(&format!(" ({failures} failures)"));
    }
    line
}

async fn keys(admin: &InProcess) -> String {
    let Some(keys) = admin.get("/keys").await else { return "Keys are not available now.".into() };
    let lines: Vec<String> = keys["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| {
            let usage = match (k["used"].as_u64(), k["token_quota"].as_u64()) {
                (Some(used), Some(quota)) => {
                    format!("{used} of {quota} tokens this {}", k["period"].as_str().unwrap_or("period"))
                }
                _ => "no quota".into(),
            };
            format!("{} ({}): {usage}", k["name"].as_str().unwrap_or("?"), k["key"].as_str().unwrap_or("?"))
        })
        .collect();
    if lines.is_empty() { "No gateway keys.".into() } else { bounded_lines(lines) }
}

/// `/disable` and `/enable`: the operator's switch, which changes only `enabled`.
async fn switch(admin: &InProcess, source: &str, enabled: bool) -> String {
    let path = format!("/sources/{}/{}", utf8_percent(source), if enabled { "enable" } else { "disable" });
    let (status, answer) = admin.call(Method::POST, &path, None).await;
    let verb = if enabled { "enabled: requests go to it again" } else { "disabled: no request goes to it" };
    done(status, &answer, |_| format!("Source {source} {verb}."))
}

fn bounded_lines(lines: Vec<String>) -> String {
    let more = lines.len().saturating_sub(MAX_LINES);
    let mut text = lines.into_iter().take(MAX_LINES).collect::<Vec<_>>().join("\n");
    if more > 0 {
        text.push_str(&format!("\n… and {more} more"));
    }
    text
}

/// A path segment from chat text: anything outside unreserved characters is escaped.
fn utf8_percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_lines_say_state_time_left_and_failures() {
        let slot =
            json!({"source": "groq", "model": "llama", "state": "cooling", "recovers_at_ms": 10_500, "failures": 2});
        assert_eq!(slot_line(&slot, 1_000), "groq/llama: cooling, 10 s left (2 failures)");
        let healthy = json!({"source": "a", "model": "m", "state": "healthy", "failures": 0});
        assert_eq!(slot_line(&healthy, 0), "a/m: healthy");
    }

    #[test]
    fn long_lists_are_cut_and_names_escaped() {
        let text = bounded_lines((0..100).map(|i| i.to_string()).collect());
        assert!(text.ends_with("… and 60 more"), "{text}");
        assert_eq!(utf8_percent("a/../b c"), "a%2F..%2Fb%20c");
    }
}
