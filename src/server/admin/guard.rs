//! Who is calling the admin API and whether their role allows the route: the config's admin
//! token (break-glass admin), a personal token, or the Telegram bot for one of its users. Every
//! write, refusal and failed login goes to the audit trail.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::access::{Actor, Outcome, Via};
use crate::domain::Role;
use crate::server::Gateway;
use crate::server::audit::{self, Asked};
use crate::server::error::{ApiError, ErrorType};

/// The role each admin route needs, by method and matched path (`/admin/api/sources/{name}`).
pub type Roles = HashMap<(Method, String), Role>;

/// A cookie-authenticated request's session CSRF token, for `/me` to hand to the WebUI.
#[derive(Debug, Clone)]
pub struct SessionCsrf(pub String);

/// Set by the Telegram bot on its in-process calls: the user it acts for. Only the process can
/// put it on a request; HTTP clients cannot.
#[derive(Debug, Clone, Copy)]
pub struct TelegramUser(pub i64);

pub async fn guard(
    State((gw, roles)): State<(Arc<Gateway>, Arc<Roles>)>,
    mut request: Request,
    next: Next,
) -> Response {
    // The bot calls in-process, with no peer address: only HTTP peers are throttled.
    let peer = audit::peer_of(&request);
    let asked = Asked::of(&request);
    let telegram = request.extensions().get::<TelegramUser>().copied();
    let session =
        crate::server::sso::session_of(&gw, request.headers()).filter(|_| sent_token(request.headers()).is_none());
    let authenticated = match &session {
        Some(session) => Ok(Actor { name: session.name.clone(), role: session.role, via: Via::Session }),
        None => authenticate_peer(&gw, request.headers(), peer, telegram),
    };
    let actor = match authenticated {
        Ok(actor) => actor,
        Err(e) => {
            if e.status == StatusCode::UNAUTHORIZED && sent_token(request.headers()).is_some() {
                gw.record_audit(gw.audit_entry(None, &asked, Outcome::FailedLogin, 401));
            }
            return e.into_response();
        }
    };
    let route = request.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_default();
    // A route without a role is refused to everyone: none can be added unguarded.
    let needed = roles.get(&(request.method().clone(), route)).copied();
    if needed.is_none_or(|needed| actor.role < needed) {
        let message = match needed {
            Some(needed) => format!("this needs the {needed} role; {} acts as {}", actor.name, actor.role),
            None => "this admin route has no role assigned, so no one may use it".to_string(),
        };
        gw.record_audit(gw.audit_entry(Some(&actor), &asked, Outcome::Refused, 403));
        return ApiError::new(StatusCode::FORBIDDEN, ErrorType::Permission, message).code("forbidden").into_response();
    }
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    // A cookie goes with every request the browser makes, a page of another site's included:
    // writes it authenticates must show they come from the WebUI.
    if let Some(session) = &session {
        if !reads && !crate::server::sso::csrf_matches(session, request.headers()) {
            gw.record_audit(gw.audit_entry(Some(&actor), &asked, Outcome::Refused, 403));
            return crate::server::sso::csrf_refused().into_response();
        }
        request.extensions_mut().insert(SessionCsrf(session.csrf.clone()));
    }
    request.extensions_mut().insert(actor.clone());
    if reads {
        return next.run(request).await;
    }
    let (response, trail) = audit::collecting(next.run(request)).await;
    gw.audit_write(&actor, &asked, response.status().as_u16(), trail);
    response
}

/// [`authenticate`], for a request from `peer`: a peer that sent too many wrong tokens lately is
/// turned away (429) before its next token is even compared. A request without a token is not
/// a guess: it gets its 401.
fn authenticate_peer(
    gw: &Gateway,
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
    telegram: Option<TelegramUser>,
) -> Result<Actor, ApiError> {
    let Some(peer) = peer.filter(|_| sent_token(headers).is_some()) else {
        return authenticate(gw, headers, telegram);
    };
    let now = gw.scheduler.now();
    if let Some(wait) = gw.auth_failures.wait(peer, now) {
        return Err(crate::server::throttle::turned_away(wait));
    }
    let verdict = authenticate(gw, headers, telegram);
    if verdict.as_ref().is_err_and(|e| e.status == StatusCode::UNAUTHORIZED) {
        gw.auth_failures.failed(peer, now);
    }
    verdict
}

fn sent_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-admin-token")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
        })
        .map(str::trim)
}

/// The actor behind the request's token.
pub(crate) fn authenticate(
    gw: &Gateway,
    headers: &HeaderMap,
    telegram: Option<TelegramUser>,
) -> Result<Actor, ApiError> {
    let Some(token) = gw.settings.admin_token.secret() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorType::InvalidRequest,
            "the admin API is off: admin_token is empty in the config",
        ));
    };
    let sent = sent_token(headers);
    // Digests are compared, so the comparison takes the same time whatever the guess.
    let digest = sent.map(|s| Sha256::digest(s.as_bytes()));
    if digest.is_some_and(|d| d == Sha256::digest(token.expose().as_bytes())) {
        return Ok(match telegram {
            Some(TelegramUser(user)) => Actor::telegram(user, gw.settings.access.telegram_role),
            None => Actor::break_glass(),
        });
    }
    if let Some(digest) = digest {
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let runtime = gw.runtime();
        if let Some(t) = runtime.file.admin_tokens.iter().find(|t| t.sha256 == hex) {
            if gw.scheduler.now().0 >= t.expires_ms {
                return Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    ErrorType::Authentication,
                    format!("personal token `{}` ({}) has expired: make a new one", t.name, t.id),
                ));
            }
            return Ok(Actor { name: t.owner.clone(), role: t.role, via: Via::Token(t.id.clone()) });
        }
    }
    // Where a made token is: the file's name, not the host's path, to whoever asks.
    let message = match gw.settings.admin_token {
        crate::config::AdminToken::Stored(..) => {
            "admin token missing or wrong: send a personal token, or the gateway's own, which it made at its first start and keeps in the file `admin_token` in its data_dir (the start's log says where)"
        }
        _ => "admin token missing or wrong: send a personal token or the config's `admin_token`",
    };
    Err(ApiError::new(StatusCode::UNAUTHORIZED, ErrorType::Authentication, message))
}
