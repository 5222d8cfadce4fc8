//! The operators' Telegram bot: long-polls the Bot API for commands from allowed chats, runs
//! them through the admin API in-process, and pushes alerts; it never blocks the gateway.

mod api;
mod commands;
mod replies;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub use api::{ApiFailure, BotApi, Update};
pub use commands::{Command, MENU, parse};

use crate::alerts::Watch;
use crate::config::TelegramConfig;
use crate::server::{Gateway, InProcess};

/// Waiting between tries, injected so tests see the waits without taking them.
#[async_trait::async_trait]
pub trait Pause: Send + Sync {
    async fn pause(&self, wait: Duration);
}

/// Really waits.
pub struct Sleep;

#[async_trait::async_trait]
impl Pause for Sleep {
    async fn pause(&self, wait: Duration) {
        tokio::time::sleep(wait).await
    }
}

/// Longest pause after network errors.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Unknown chats remembered (to log each once); past it they are still ignored, just not logged.
const MAX_LOGGED_STRANGERS: usize = 1000;

pub struct Bot {
    admin: InProcess,
    api: BotApi,
    allowed: HashSet<i64>,
    allowed_users: HashSet<i64>,
    poll_timeout: Duration,
    alert_every: Duration,
    pause: Arc<dyn Pause>,
    watch: Watch,
    strangers: Mutex<HashSet<i64>>,
}

impl Bot {
    pub fn new(gateway: Arc<Gateway>, config: &TelegramConfig, pause: Arc<dyn Pause>) -> Bot {
        let token = gateway.settings.admin_token.secret().map(|s| s.expose().to_string()).unwrap_or_default();
        Bot {
            admin: InProcess::new(crate::server::admin_service(gateway.clone()), token),
            api: BotApi::new(config.api_base.as_str(), config.bot_token.expose()),
            allowed: config.allowed_chats.iter().copied().collect(),
            allowed_users: config.allowed_users.iter().copied().collect(),
            poll_timeout: Duration::from_secs(config.poll_timeout_seconds.get()),
            alert_every: Duration::from_secs(config.alert_check_seconds.get()),
            pause,
            watch: Watch::new(gateway),
            strangers: Mutex::new(HashSet::new()),
        }
    }

    /// Starts the bot's two loops (updates, alerts) on the runtime.
    pub fn spawn(self: Arc<Self>) {
        let alerts = self.clone();
        crate::tasks::spawn("telegram alerts", async move { alerts.watch().await });
        crate::tasks::spawn("telegram updates", async move { self.run().await });
    }

    /// Sets the command menu, then answers updates for as long as the process runs.
    pub async fn run(&self) {
        if let Err(e) = self.api.set_commands(MENU).await {
            tracing::warn!("telegram: could not set the command menu: {e}");
        }
        let mut offset = 0i64;
        let mut backoff = Duration::from_secs(1);
        let mut failing = false;
        loop {
            match self.api.get_updates(offset, self.poll_timeout).await {
                Ok(updates) => {
                    if failing {
                        tracing::info!("telegram: reaching the Bot API again");
                        failing = false;
                    }
                    backoff = Duration::from_secs(1);
                    for update in updates {
                        offset = offset.max(update.update_id.saturating_add(1));
                        self.handle(update).await;
                    }
                }
                Err(ApiFailure::RetryAfter(wait)) => self.pause.pause(wait).await,
                Err(e) => {
                    if !failing {
                        tracing::warn!("telegram: getUpdates failed, retrying with backoff: {e}");
                        failing = true;
                    }
                    self.pause.pause(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Looks for alerts every `alert_check_seconds`.
    async fn watch(&self) {
        loop {
            self.pause.pause(self.alert_every).await;
            self.check_alerts().await;
        }
    }

    /// One command message or button press; anything from a chat not allowed is ignored.
    pub async fn handle(&self, update: Update) {
        let (chat, sender, text, callback) = match (update.message, update.callback_query) {
            (Some(message), _) => (message.chat.id, message.from.map(|u| u.id), message.text.unwrap_or_default(), None),
            (None, Some(query)) => match query.message {
                Some(message) => {
                    (message.chat.id, query.from.map(|u| u.id), query.data.unwrap_or_default(), Some(query.id))
                }
                None => return,
            },
            (None, None) => return,
        };
        if !self.allowed.contains(&chat) {
            let mut strangers = self.strangers.lock().unwrap_or_else(|p| p.into_inner());
            if strangers.len() < MAX_LOGGED_STRANGERS && strangers.insert(chat) {
                tracing::warn!(chat, "telegram: ignoring a chat not in telegram.allowed_chats");
            }
            return;
        }
        // In a group every member could command the gateway; `allowed_users` narrows it to people.
        if !self.allowed_users.is_empty() && !sender.is_some_and(|id| self.allowed_users.contains(&id)) {
            tracing::warn!(chat, sender, "telegram: ignoring a sender not in telegram.allowed_users");
            return;
        }
        let Some(command) = parse(&text) else { return };
        tracing::info!(chat, command = command.name(), "telegram command");
        if let Some(id) = callback
            && let Err(e) = self.api.answer_callback(&id, command.name()).await
        {
            tracing::warn!(chat, "telegram: could not answer the button press: {e}");
        }
        // The sender is who the audit trail names; without one (a channel post), the chat.
        let admin = self.admin.for_telegram_user(sender.unwrap_or(chat));
        let (reply, keyboard) = replies::run(&admin, &command).await;
        self.send(chat, &reply, keyboard).await;
    }

    /// Sends a message, waiting out Telegram's 429s (a few times) and giving up on other errors.
    async fn send(&self, chat: i64, text: &str, keyboard: Option<Value>) {
        for _ in 0..3 {
            match self.api.send_message(chat, text, keyboard.clone()).await {
                Ok(()) => return,
                Err(ApiFailure::RetryAfter(wait)) => self.pause.pause(wait).await,
                Err(e) => {
                    tracing::warn!(chat, "telegram: message not sent: {e}");
                    return;
                }
            }
        }
        tracing::warn!(chat, "telegram: message not sent: Telegram kept asking to wait");
    }

    /// Looks at the gateway once and sends what deserves an alert to every allowed chat.
    pub async fn check_alerts(&self) {
        let messages = self.watch.look().await;
        if messages.is_empty() {
            return;
        }
        // Grouped: one message per look, whatever happened.
        let text = messages.join("\n\n");
        let mut chats: Vec<i64> = self.allowed.iter().copied().collect();
        chats.sort();
        for chat in chats {
            self.send(chat, &text, None).await;
        }
    }
}

/// The buttons under `/help` and `/status`: the common interventions.
pub fn keyboard() -> Value {
    let button = |text: &str, data: &str| json!({"text": text, "callback_data": data});
    json!({"inline_keyboard": [
        [button("Health", "/health"), button("Clear cooldowns", "/clear")],
        [button("Clear affinity", "/affinity_clear"), button("Reset stats", "/stats_reset")],
        [button("smart", "/mode smart"), button("order", "/mode order"), button("priority", "/mode priority")],
    ]})
}
