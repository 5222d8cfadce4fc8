//! What a gateway key's calls are counted against besides slots: the key's tokens (its
//! `token_quota`), its dollars (its `budget`) and its group's dollars (a group's budget).

use std::fmt;

use super::{GroupName, KeyName, Period, Usd};

/// One counter a call is charged to, per period window.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Account {
    /// Tokens of a key (its token quota).
    Tokens(KeyName),
    /// Pico-dollars of a key (its budget).
    KeyUsd(KeyName),
    /// Pico-dollars of every key of a route group together (the group's budget).
    GroupUsd(GroupName),
}

impl Account {
    /// Whether it counts money (pico-dollars) rather than tokens.
    pub fn is_money(&self) -> bool {
        !matches!(self, Account::Tokens(_))
    }
}

impl Account {
    /// How the state database names a money account (`key:NAME`, `group:NAME`); `None` for
    /// tokens, which have a table of their own.
    pub fn stored_name(&self) -> Option<String> {
        match self {
            Account::Tokens(_) => None,
            Account::KeyUsd(key) => Some(format!("key:{key}")),
            Account::GroupUsd(group) => Some(format!("group:{group}")),
        }
    }

    /// The money account a stored name names.
    pub fn from_stored_name(name: &str) -> Option<Account> {
        match name.split_once(':')? {
            ("key", key) => Some(Account::KeyUsd(KeyName::new(key))),
            ("group", group) => Some(Account::GroupUsd(GroupName::new(group))),
            _ => None,
        }
    }
}

impl fmt::Display for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Account::Tokens(key) | Account::KeyUsd(key) => write!(f, "key `{key}`"),
            Account::GroupUsd(group) => write!(f, "group `{group}`"),
        }
    }
}

/// A spending limit in USD per period (a key's `budget`, or a group's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub usd: Usd,
    #[serde(default = "default_budget_period")]
    pub period: Period,
}

fn default_budget_period() -> Period {
    Period::Month
}

impl Budget {
    /// The limit as the account counts it: pico-dollars.
    pub fn limit(&self) -> u64 {
        self.usd.pico().max(0) as u64
    }
}
