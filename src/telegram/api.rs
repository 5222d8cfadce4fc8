//! A thin typed client for the few Telegram Bot API methods the bot uses. The token is part
//! of every URL, so no URL ever reaches an error message or the log.

use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Largest Bot API answer read (a batch of updates is a few KB).
const MAX_ANSWER_BYTES: usize = 4 << 20;
/// Longest message text Telegram accepts.
pub const MAX_TEXT_CHARS: usize = 4096;

/// Why a call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiFailure {
    /// Telegram's 429: wait this long before the next call.
    #[error("Telegram asks to wait {} s", .0.as_secs())]
    RetryAfter(Duration),
    /// The network or the answer failed (worth retrying after a pause).
    #[error("{0}")]
    Transport(String),
    /// Telegram refused the call (`ok: false`).
    #[error("Telegram refused {method}: {description}")]
    Refused { method: &'static str, description: String },
}

pub struct BotApi {
    http: reqwest::Client,
    /// `api_base/botTOKEN`: never printed.
    root: String,
    token: String,
}

impl BotApi {
    pub fn new(api_base: &str, token: &str) -> BotApi {
        BotApi {
            http: crate::http_client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .expect("a reqwest client with rustls"),
            root: format!("{}/bot{token}", api_base.trim_end_matches('/')),
            token: token.to_string(),
        }
    }

    /// Calls `method` with a JSON body; `wait` bounds the whole call.
    async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        body: Value,
        wait: Duration,
    ) -> Result<T, ApiFailure> {
        let sent = self
            .http
            .post(format!("{}/{method}", self.root))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(wait)
            .send()
            .await;
        let mut response = sent.map_err(|e| ApiFailure::Transport(self.masked(&e.without_url().to_string())))?;
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if bytes.len() + chunk.len() <= MAX_ANSWER_BYTES => bytes.extend_from_slice(&chunk),
                Ok(Some(_)) => {
                    return Err(ApiFailure::Transport(format!("{method}: answer over {MAX_ANSWER_BYTES} bytes")));
                }
                Ok(None) => break,
                Err(e) => return Err(ApiFailure::Transport(self.masked(&e.without_url().to_string()))),
            }
        }
        let answer: Answer<T> = serde_json::from_slice(&bytes).map_err(|e| {
            ApiFailure::Transport(format!("{method}: not a Bot API answer (HTTP {}): {e}", response.status().as_u16()))
        })?;
        match answer {
            Answer { ok: true, result: Some(result), .. } => Ok(result),
            Answer { parameters: Some(Parameters { retry_after: Some(seconds) }), .. } => {
                Err(ApiFailure::RetryAfter(Duration::from_secs(seconds.min(3600))))
            }
            Answer { description, .. } => Err(ApiFailure::Refused {
                method,
                description: self.masked(&description.unwrap_or_default()).chars().take(300).collect(),
            }),
        }
    }

    /// Text with the token replaced, whatever put it there.
    fn masked(&self, text: &str) -> String {
        if self.token.is_empty() { text.to_string() } else { text.replace(&self.token, "***") }
    }

    /// Long-polls for updates after `offset`, waiting up to `timeout` for one.
    pub async fn get_updates(&self, offset: i64, timeout: Duration) -> Result<Vec<Update>, ApiFailure> {
        let body =
            json!({"offset": offset, "timeout": timeout.as_secs(), "allowed_updates": ["message", "callback_query"]});
        self.call("getUpdates", body, timeout + Duration::from_secs(10)).await
    }

    pub async fn send_message(&self, chat: i64, text: &str, keyboard: Option<Value>) -> Result<(), ApiFailure> {
        let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
        let mut body = json!({"chat_id": chat, "text": text, "disable_web_page_preview": true});
        if let Some(keyboard) = keyboard {
            body["reply_markup"] = keyboard;
        }
        self.call::<Value>("sendMessage", body, Duration::from_secs(30)).await.map(drop)
    }

    pub async fn answer_callback(&self, id: &str, text: &str) -> Result<(), ApiFailure> {
        let body = json!({"callback_query_id": id, "text": text.chars().take(200).collect::<String>()});
        self.call::<Value>("answerCallbackQuery", body, Duration::from_secs(30)).await.map(drop)
    }

    /// The command menu Telegram shows: (command, description).
    pub async fn set_commands(&self, commands: &[(&str, &str)]) -> Result<(), ApiFailure> {
        let commands: Vec<Value> = commands
            .iter()
            .map(|(command, description)| json!({"command": command, "description": description}))
            .collect();
        self.call::<Value>("setMyCommands", json!({"commands": commands}), Duration::from_secs(30)).await.map(drop)
    }
}

#[derive(Deserialize)]
struct Answer<T> {
    ok: bool,
    result: Option<T>,
    description: Option<String>,
    parameters: Option<Parameters>,
}

#[derive(Deserialize)]
struct Parameters {
    retry_after: Option<u64>,
}

/// One update; only what the bot reads (Telegram sends more).
#[derive(Debug, Clone, Deserialize)]
pub struct Update {
    pub update_id: i64,
    pub message: Option<Message>,
    pub callback_query: Option<CallbackQuery>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub chat: Chat,
    /// The sender (absent for messages sent on behalf of a channel).
    pub from: Option<User>,
    pub text: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    pub id: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CallbackQuery {
    pub id: String,
    /// Who pressed the button.
    pub from: Option<User>,
    pub message: Option<Message>,
    pub data: Option<String>,
}
