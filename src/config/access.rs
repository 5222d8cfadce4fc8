//! `access:`: how long personal admin tokens may live and how long the audit trail is kept.
//! The tokens themselves are made at run time and kept (as digests) in the runtime file.

use serde::{Deserialize, Serialize};

use super::InRange;
use crate::domain::Role;

/// Operators' access settings (a restart changes them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// Longest life a personal token may be given, in days.
    pub token_max_days: InRange<1, 3650>,
    /// Audit entries older than this are deleted, in days.
    pub audit_retention_days: InRange<1, 36500>,
    /// Most audit entries kept; past it the oldest go first.
    pub audit_max_entries: InRange<1000, 100_000_000>,
    /// The role the Telegram bot's allowed users act with.
    pub telegram_role: Role,
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig {
            token_max_days: InRange::new(365),
            audit_retention_days: InRange::new(365),
            audit_max_entries: InRange::new(1_000_000),
            telegram_role: Role::Admin,
        }
    }
}

/// A personal admin token (`POST /admin/api/tokens`): only its digest is kept; the secret was
/// shown once to whoever made it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AdminTokenRecord {
    /// The first 8 bytes of the digest, hex: how the token is named in lists and the audit trail.
    pub id: String,
    /// What its owner called it (`ci`, `laptop`).
    pub name: String,
    /// The identity it acts as.
    pub owner: String,
    pub role: Role,
    /// sha256 of the secret, hex.
    pub sha256: String,
    /// The secret masked (`sya…9f3c`), to recognise it by.
    pub hint: String,
    pub created_ms: u64,
    pub expires_ms: u64,
}
