//! Operators' own access: who the caller is (`/me`), personal tokens (made for oneself at one's
//! own role or below; admins for anyone), and the audit trail's pages.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};

use super::health::internal;
use super::{body, not_found};
use crate::access::{Actor, AuditQuery, identity_problem};
use crate::config::{AdminTokenRecord, mask};
use crate::domain::Role;
use crate::server::Gateway;
use crate::server::auth::{digest_hex, id_of_digest_hex};
use crate::server::error::ApiError;

const DAY_MS: u64 = 86_400_000;
/// Personal tokens one identity may hold (expired ones count until revoked).
const MAX_TOKENS_PER_OWNER: usize = 50;
/// Personal tokens in all.
const MAX_TOKENS: usize = 5_000;
/// A personal token's life unless asked otherwise, in days.
const DEFAULT_TOKEN_DAYS: u64 = 90;

/// `GET /admin/api/me`: who the caller acts as; a WebUI session also gets its CSRF token.
pub async fn me(Extension(actor): Extension<Actor>, csrf: Option<Extension<super::SessionCsrf>>) -> Json<Value> {
    let token = match &actor.via {
        crate::access::Via::Token(id) => Some(id.clone()),
        _ => None,
    };
    let mut me = json!({"name": actor.name, "role": actor.role, "via": actor.via.as_str(), "token_id": token});
    if let Some(Extension(super::SessionCsrf(csrf))) = csrf {
        me["csrf"] = json!(csrf);
    }
    Json(me)
}

fn token_json(gw: &Gateway, t: &AdminTokenRecord) -> Value {
    json!({
        "id": t.id, "name": t.name, "owner": t.owner, "role": t.role, "hint": t.hint,
        "created_ms": t.created_ms, "expires_ms": t.expires_ms, "expired": gw.scheduler.now().0 >= t.expires_ms,
    })
}

/// An admin sees every token; anyone else their own.
fn sees(actor: &Actor, t: &AdminTokenRecord) -> bool {
    actor.role == Role::Admin || t.owner == actor.name
}

/// `GET /admin/api/tokens`
pub async fn list(State(gw): State<Arc<Gateway>>, Extension(actor): Extension<Actor>) -> Json<Value> {
    let runtime = gw.runtime();
    let tokens: Vec<Value> =
        runtime.file.admin_tokens.iter().filter(|t| sees(&actor, t)).map(|t| token_json(&gw, t)).collect();
    Json(json!({ "tokens": tokens }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewToken {
    name: String,
    role: Option<Role>,
    expires_days: Option<u64>,
    owner: Option<String>,
}

/// `POST /admin/api/tokens`: a personal token; the answer carries its secret, the only time it
/// is shown.
pub async fn create(
    State(gw): State<Arc<Gateway>>,
    Extension(actor): Extension<Actor>,
    bytes: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let asked: NewToken = body(&bytes)?;
    if let Some(problem) = identity_problem(&asked.name) {
        return Err(ApiError::invalid_request(format!("name {problem}")).param("name"));
    }
    let role = asked.role.unwrap_or(actor.role);
    if role > actor.role {
        return Err(forbidden(format!("{} acts as {} and cannot make a {role} token", actor.name, actor.role)));
    }
    let owner = asked.owner.unwrap_or_else(|| actor.name.clone());
    if owner != actor.name && actor.role != Role::Admin {
        return Err(forbidden("only an admin makes tokens for someone else".into()));
    }
    if let Some(problem) = identity_problem(&owner) {
        return Err(ApiError::invalid_request(format!("owner {problem}")).param("owner"));
    }
    let longest = gw.settings.access.token_max_days.get();
    let days = asked.expires_days.unwrap_or(DEFAULT_TOKEN_DAYS.min(longest));
    if !(1..=longest).contains(&days) {
        return Err(ApiError::invalid_request(format!(
            "expires_days must be from 1 to {longest} (access.token_max_days)"
        ))
        .param("expires_days"));
    }
    let secret = format!("sya_{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let sha256 = digest_hex(&secret);
    let now = gw.scheduler.now().0;
    let record = AdminTokenRecord {
        id: id_of_digest_hex(&sha256).unwrap_or_default(),
        name: asked.name,
        owner,
        role,
        sha256,
        hint: mask(&secret),
        created_ms: now,
        expires_ms: now.saturating_add(days * DAY_MS),
    };
    let shown = token_json(&gw, &record);
    gw.edit(|file, _| {
        let owned = file.admin_tokens.iter().filter(|t| t.owner == record.owner).count();
        if owned >= MAX_TOKENS_PER_OWNER || file.admin_tokens.len() >= MAX_TOKENS {
            return Err(ApiError::invalid_request(format!(
                "{} holds {owned} tokens (at most {MAX_TOKENS_PER_OWNER}): revoke some first",
                record.owner
            ))
            .code("too_many_tokens"));
        }
        file.admin_tokens.push(record);
        Ok(())
    })
    .await?;
    let mut shown = shown;
    shown["token"] = json!(secret);
    shown["note"] = json!("the token is shown this once; only a digest of it is kept");
    Ok((StatusCode::CREATED, Json(shown)))
}

/// `DELETE /admin/api/tokens/{id}`: revoked at once, on every replica.
pub async fn revoke(
    State(gw): State<Arc<Gateway>>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    gw.edit(|file, _| {
        let at = file
            .admin_tokens
            .iter()
            .position(|t| t.id == id && sees(&actor, t))
            .ok_or_else(|| not_found("personal token", &id))?;
        file.admin_tokens.remove(at);
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /admin/api/audit`: the trail, newest first, by actor, outcome, path and time.
pub async fn audit(
    State(gw): State<Arc<Gateway>>,
    RawQuery(query): RawQuery,
) -> Result<Json<crate::state::AuditPage>, ApiError> {
    let query: AuditQuery = serde_urlencoded::from_str(query.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::invalid_request(format!("bad audit query: {e}")))?;
    let state = gw.state.clone();
    let page = tokio::task::spawn_blocking(move || state.query_audit(&query))
        .await
        .map_err(|e| internal(e.to_string()))?
        .map_err(|e| internal(e.to_string()))?;
    Ok(Json(page))
}

fn forbidden(message: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, crate::server::error::ErrorType::Permission, message).code("forbidden")
}
