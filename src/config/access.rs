//! `access:`: single sign-on for the WebUI, how long personal admin tokens may live and how long
//! the audit trail is kept. The tokens themselves are made at run time and kept (as digests) in
//! the runtime file.

use serde::{Deserialize, Serialize};

use super::{InRange, Secret};
use crate::domain::Role;

/// Operators' access settings (a restart changes them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// OpenID Connect sign-in for the WebUI; off when absent.
    pub sso: Option<SsoConfig>,
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
            sso: None,
            token_max_days: InRange::new(365),
            audit_retention_days: InRange::new(365),
            audit_max_entries: InRange::new(1_000_000),
            telegram_role: Role::Admin,
        }
    }
}

/// `access.sso`: an OpenID provider (authorization code with PKCE), and who gets which role.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsoConfig {
    /// The provider's issuer URL; its `/.well-known/openid-configuration` is read from there.
    pub issuer: String,
    pub client_id: String,
    /// Absent: a public client (PKCE alone).
    #[serde(default)]
    pub client_secret: Option<Secret>,
    /// Where the provider sends people back: `https://gateway.example.com/auth/callback`.
    /// Absent: this gateway's own address as the browser reached it (the provider accepts
    /// only the addresses registered with it).
    #[serde(default)]
    pub redirect_url: Option<String>,
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The claim listing a person's groups.
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Who gets which role: the highest role of the rules that match.
    #[serde(default)]
    pub roles: Vec<RoleRule>,
    /// The role of a person no rule matches; absent, they cannot sign in.
    #[serde(default)]
    pub default_role: Option<Role>,
    /// How long a WebUI session lasts, in minutes.
    #[serde(default = "default_session_minutes")]
    pub session_minutes: InRange<5, 1440>,
}

/// One rule of `access.sso.roles`: a group or an email, and the role it gives.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleRule {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    pub role: Role,
}

fn default_scopes() -> Vec<String> {
    ["openid", "email", "profile", "groups"].map(String::from).to_vec()
}

fn default_groups_claim() -> String {
    "groups".into()
}

fn default_session_minutes() -> InRange<5, 1440> {
    InRange::new(60)
}

impl SsoConfig {
    /// What is wrong with it, as (field under `access.sso`, problem, fix).
    pub fn problem(&self) -> Option<(String, String, String)> {
        let url = |field: &str, text: &str| -> Option<(String, String, String)> {
            let Ok(parsed) = reqwest::Url::parse(text) else {
                return Some((
                    field.into(),
                    format!("`{text}` is not a URL"),
                    "write e.g. https://login.example.com".into(),
                ));
            };
            let loopback = matches!(parsed.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
            if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
                return Some((
                    field.into(),
                    format!("`{text}` is not https: tokens would cross the network in the clear"),
                    "use the https address (plain http only on loopback, for tests)".into(),
                ));
            }
            None
        };
        if let Some(problem) = url("issuer", &self.issuer) {
            return Some(problem);
        }
        if let Some(problem) = self.redirect_url.as_deref().and_then(|r| url("redirect_url", r)) {
            return Some(problem);
        }
        if self.client_id.is_empty() {
            return Some(("client_id".into(), "is empty".into(), "the client id registered at the provider".into()));
        }
        if !self.scopes.iter().any(|s| s == "openid") {
            return Some(("scopes".into(), "lacks `openid`".into(), "add openid to the scopes".into()));
        }
        for (i, rule) in self.roles.iter().enumerate() {
            if rule.group.is_some() == rule.email.is_some() {
                return Some((
                    format!("roles[{i}]"),
                    "needs exactly one of group and email".into(),
                    "write {group: NAME, role: ROLE} or {email: ADDRESS, role: ROLE}".into(),
                ));
            }
        }
        if self.roles.is_empty() && self.default_role.is_none() {
            return Some((
                "roles".into(),
                "is empty and there is no default_role, so no one could sign in".into(),
                "map groups or emails to roles, e.g. roles: [{group: gateway-admins, role: admin}]".into(),
            ));
        }
        None
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    const SOURCES: &str = "sources:\n  - {name: a, base_url: 'http://127.0.0.1:9', models: [{name: m}]}\n";

    fn errors(access: &str) -> String {
        let text = format!("access:\n{access}{SOURCES}");
        match crate::config::load_str(&text, Path::new("c.yaml"), &|_| None, &["openai"]) {
            Ok(config) => format!("accepted: {:?}", config.settings.access.sso.as_ref().map(|s| &s.issuer)),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn single_sign_on_needs_https_a_client_and_someone_who_may_sign_in() {
        let good =
            "  sso: {issuer: 'https://login.example.com', client_id: gw, roles: [{group: ops, role: operator}]}\n";
        assert_eq!(errors(good), "accepted: Some(\"https://login.example.com\")");
        let e = errors("  sso: {issuer: 'http://login.example.com', client_id: gw, default_role: viewer}\n");
        assert!(e.contains("access.sso.issuer") && e.contains("not https"), "{e}");
        assert!(
            errors("  sso: {issuer: 'http://localhost:8000', client_id: gw, default_role: viewer}\n")
                .starts_with("accepted")
        );
        let e = errors("  sso: {issuer: 'https://idp', client_id: gw}\n");
        assert!(e.contains("access.sso.roles") && e.contains("no one could sign in"), "{e}");
        let e = errors("  sso: {issuer: 'https://idp', client_id: gw, roles: [{group: a, email: b@c, role: admin}]}\n");
        assert!(e.contains("access.sso.roles[0]") && e.contains("exactly one of group and email"), "{e}");
        let e = errors("  sso: {issuer: 'https://idp', client_id: gw, roles: [{group: a, role: root}]}\n");
        assert!(e.contains("access.sso") && e.contains("root"), "{e}");
        let e = errors("  token_max_days: 0\n");
        assert!(e.contains("access.token_max_days"), "{e}");
    }
}
