//! Who acts on the admin API and what they did: the acting identity with its role, and the
//! audit trail's entries with their masked before/after. Plain types and pure functions.

mod audit;
pub mod sso;

pub use audit::{AuditEntry, AuditQuery, ChangeRecord, MAX_AUDIT_PAGE, Outcome, changes_between};

use serde::Serialize;

use crate::domain::Role;

/// The identity behind an admin request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    /// `admin` for the config's admin token; a token's owner; `telegram:<user id>`.
    pub name: String,
    pub role: Role,
    pub via: Via,
}

/// How an actor proved who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "via", content = "id")]
pub enum Via {
    /// The config's `admin_token`: the break-glass admin.
    AdminToken,
    /// A personal token, by its id.
    Token(String),
    /// The Telegram bot, for one of its allowed users.
    Telegram(i64),
    /// A WebUI session opened by single sign-on.
    Session,
}

impl Via {
    pub fn as_str(&self) -> &'static str {
        match self {
            Via::AdminToken => "admin_token",
            Via::Token(_) => "token",
            Via::Telegram(_) => "telegram",
            Via::Session => "session",
        }
    }
}

impl Actor {
    /// The break-glass admin: whoever holds the config's `admin_token`.
    pub fn break_glass() -> Actor {
        Actor { name: "admin".into(), role: Role::Admin, via: Via::AdminToken }
    }

    /// One of the Telegram bot's allowed users, acting with `role`.
    pub fn telegram(user: i64, role: Role) -> Actor {
        Actor { name: format!("telegram:{user}"), role, via: Via::Telegram(user) }
    }
}

/// Identity names (token owners): short, printable, no spaces at either end.
pub fn identity_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 128 {
        return Some("must be 1 to 128 characters");
    }
    if name.trim() != name || name.chars().any(char::is_control) {
        return Some("must not start or end with spaces or hold control characters");
    }
    None
}
