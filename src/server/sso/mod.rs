//! Single sign-on for the WebUI (`access.sso`): `/auth/login` sends the browser to the OpenID
//! provider (authorization code, PKCE, state bound to a cookie, nonce), `/auth/callback` checks
//! what comes back and opens a server-side session, `/auth/logout` closes it.

mod provider;
mod sessions;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use cookie::{Cookie, SameSite};
use serde::Deserialize;
use serde_json::json;

use super::Gateway;
use super::audit::Asked;
use crate::access::sso::{Expected, SsoError, pkce_challenge, role_for, verify_id_token};
use crate::access::{Actor, Outcome, Via};
use crate::config::SsoConfig;
pub use sessions::Session;
use sessions::{PENDING_MS, Pending, Sessions, random_secret};

/// The WebUI session's cookie.
pub const SESSION_COOKIE: &str = "switchyard_session";
/// The sign-in's cookie: the state it sent, so a callback is finished only in the browser that
/// started it.
const LOGIN_COOKIE: &str = "switchyard_login";
/// The header a cookie-authenticated write carries its session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Single sign-on's provider and sessions.
pub struct Sso {
    provider: provider::Provider,
    sessions: Sessions,
}

impl Sso {
    pub fn new(config: SsoConfig) -> anyhow::Result<Sso> {
        Ok(Sso { provider: provider::Provider::new(config)?, sessions: Sessions::default() })
    }

    fn config(&self) -> &SsoConfig {
        &self.provider.config
    }
}

pub fn router() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/auth/sso", get(offered))
        .route("/auth/login", get(login))
        .route("/auth/callback", get(callback))
        .route("/auth/logout", post(logout))
}

/// The session a request's cookie names, if open.
pub fn session_of(gw: &Gateway, headers: &HeaderMap) -> Option<Session> {
    let sso = gw.sso.as_ref()?;
    let id = cookie_value(headers, SESSION_COOKIE)?;
    sso.sessions.get(&id, gw.scheduler.now().0)
}

fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| Cookie::split_parse(v.to_string()).flatten())
        .find(|c| c.name() == name)
        .map(|c| c.value().to_string())
}

/// `GET /auth/sso`: whether the WebUI offers single sign-on.
async fn offered(State(gw): State<Arc<Gateway>>) -> Json<serde_json::Value> {
    match gw.sso {
        Some(_) => Json(json!({"enabled": true, "login": "/auth/login"})),
        None => Json(json!({"enabled": false})),
    }
}

/// Where the provider sends the browser back: the configured address, or this gateway's as the
/// browser reached it (the provider only sends codes to addresses registered with it).
fn redirect_uri(config: &SsoConfig, headers: &HeaderMap) -> Option<String> {
    if let Some(fixed) = &config.redirect_url {
        return Some(fixed.clone());
    }
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let https = headers.get("x-forwarded-proto").is_some_and(|p| p.as_bytes() == b"https");
    let url = reqwest::Url::parse(&format!("{}://{host}/auth/callback", if https { "https" } else { "http" })).ok()?;
    // A Host header that adds a path, query or credentials is not an address of ours.
    (url.path() == "/auth/callback" && url.query().is_none() && url.username().is_empty()).then(|| url.to_string())
}

fn cookie(name: &'static str, value: String, path: &'static str, max_age_s: i64, secure: bool) -> HeaderValue {
    let cookie = Cookie::build((name, value))
        .path(path)
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(max_age_s))
        .build();
    HeaderValue::from_str(&cookie.to_string()).expect("a cookie of safe characters")
}

fn to(location: &str, cookies: Vec<HeaderValue>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, location.to_string())]).into_response();
    for c in cookies {
        response.headers_mut().append(header::SET_COOKIE, c);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Back to the WebUI's login page with why the sign-in did not happen.
fn refused(message: &str) -> Response {
    let query = serde_urlencoded::to_string([("sso_error", message)]).unwrap_or_default();
    to(&format!("/ui/?{query}"), vec![])
}

/// `GET /auth/login`: off to the provider.
async fn login(State(gw): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    let Some(sso) = &gw.sso else { return not_offered() };
    let (metadata, _) = match sso.provider.known(false).await {
        Ok(known) => known,
        Err(e) => {
            tracing::warn!("single sign-on: the provider could not be read: {}", crate::logsafe::Escaped(&e));
            return refused("the identity provider could not be reached; try again, or use a token");
        }
    };
    let Some(redirect) = redirect_uri(sso.config(), &headers) else {
        return refused("the gateway cannot tell its own address: set access.sso.redirect_url");
    };
    let (state, nonce, verifier) = (random_secret(), random_secret(), random_secret());
    let Ok(mut url) = reqwest::Url::parse(&metadata.authorization_endpoint) else {
        return refused("the identity provider's authorization endpoint is not a URL");
    };
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &sso.config().client_id)
        .append_pair("redirect_uri", &redirect)
        .append_pair("scope", &sso.config().scopes.join(" "))
        .append_pair("state", &state)
        .append_pair("nonce", &nonce)
        .append_pair("code_challenge", &pkce_challenge(&verifier))
        .append_pair("code_challenge_method", "S256");
    let secure = redirect.starts_with("https:");
    let pending = Pending { nonce, verifier, redirect_uri: redirect, started_ms: gw.scheduler.now().0 };
    sso.sessions.start(state.clone(), pending, gw.scheduler.now().0);
    let login = cookie(LOGIN_COOKIE, state, "/auth", (PENDING_MS / 1000) as i64, secure);
    to(url.as_str(), vec![login])
}

#[derive(Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
}

/// `GET /auth/callback`: the provider's answer, checked; a session on success.
async fn callback(State(gw): State<Arc<Gateway>>, request: Request) -> Response {
    let Some(sso) = &gw.sso else { return not_offered() };
    let asked = Asked::of(&request);
    let headers = request.headers();
    let now = gw.scheduler.now();
    // Failed sign-ins count with wrong admin tokens: an address that keeps failing is turned
    // away before it can fill the audit trail.
    let peer = super::audit::peer_of(&request);
    if peer.and_then(|p| gw.auth_failures.wait(p, now)).is_some() {
        return refused("too many failed sign-ins from this address; wait a minute");
    }
    let Ok(answer) = serde_urlencoded::from_str::<Callback>(request.uri().query().unwrap_or_default()) else {
        return refused("the identity provider's answer does not read");
    };
    let fail = |who: Option<&str>, why: String| {
        if let Some(peer) = peer {
            gw.auth_failures.failed(peer, now);
        }
        let actor =
            who.map(|name| Actor { name: name.to_string(), role: crate::domain::Role::Viewer, via: Via::Session });
        let mut entry = gw.audit_entry(actor.as_ref(), &asked, Outcome::FailedLogin, 401);
        entry.via = Via::Session.as_str().into();
        entry.role = None;
        entry.note = Some(format!("single sign-on refused: {why}"));
        gw.record_audit(entry);
        refused(&why)
    };
    // The state must be the one this browser's sign-in sent, and is used once.
    let state = answer.state.as_deref().unwrap_or_default();
    let bound = cookie_value(headers, LOGIN_COOKIE).is_some_and(|c| !state.is_empty() && c == state);
    let pending = if bound { sso.sessions.finish(state, now.0) } else { None };
    let Some(pending) = pending else {
        return fail(None, "this sign-in was not started here or took too long; sign in again".into());
    };
    if let Some(error) = answer.error {
        return fail(None, format!("the identity provider refused the sign-in ({})", crate::logsafe::Escaped(&error)));
    }
    let (metadata, keys) = match sso.provider.known(false).await {
        Ok(known) => known,
        Err(e) => return fail(None, format!("the identity provider could not be read: {e}")),
    };
    // RFC 9207: an answer that names another issuer is not our provider's.
    if answer.iss.as_deref().is_some_and(|iss| iss != metadata.issuer) {
        return fail(None, SsoError::Issuer.to_string());
    }
    let Some(code) = answer.code else { return fail(None, "the identity provider sent no code".into()) };
    let token = match sso.provider.exchange(&metadata, &code, &pending.redirect_uri, &pending.verifier).await {
        Ok(token) => token,
        Err(e) => return fail(None, e),
    };
    let expected = Expected {
        issuer: &metadata.issuer,
        client_id: &sso.config().client_id,
        nonce: &pending.nonce,
        groups_claim: &sso.config().groups_claim,
        now_seconds: (now.0 / 1000) as i64,
    };
    let mut verified = verify_id_token(&token, &keys, &expected);
    if verified == Err(SsoError::UnknownKey) {
        // The provider may have rotated its keys since they were read.
        if let Ok((_, fresh)) = sso.provider.known(true).await {
            verified = verify_id_token(&token, &fresh, &expected);
        }
    }
    let person = match verified {
        Ok(person) => person,
        Err(e) => return fail(None, e.to_string()),
    };
    let role = match role_for(&person, sso.config()) {
        Ok(role) => role,
        Err(e) => return fail(Some(&person.name), e.to_string()),
    };
    let expires_ms = now.0 + sso.config().session_minutes.get() * 60_000;
    let session = Session { name: person.name.clone(), role, csrf: random_secret(), expires_ms };
    let id = sso.sessions.open(session, now.0);
    let actor = Actor { name: person.name, role, via: Via::Session };
    let mut entry = gw.audit_entry(Some(&actor), &asked, Outcome::Done, 200);
    entry.note = Some(format!("signed in with single sign-on as {role}"));
    gw.record_audit(entry);
    let secure = pending.redirect_uri.starts_with("https:");
    let session_cookie = cookie(SESSION_COOKIE, id, "/", (sso.config().session_minutes.get() * 60) as i64, secure);
    to("/ui/", vec![session_cookie, cookie(LOGIN_COOKIE, String::new(), "/auth", 0, secure)])
}

/// `POST /auth/logout` (with the session's CSRF token): the session is closed here and now.
async fn logout(State(gw): State<Arc<Gateway>>, request: Request) -> Response {
    let Some(sso) = &gw.sso else { return not_offered() };
    let asked = Asked::of(&request);
    let headers = request.headers();
    let Some(id) = cookie_value(headers, SESSION_COOKIE) else { return StatusCode::NO_CONTENT.into_response() };
    let Some(session) = sso.sessions.get(&id, gw.scheduler.now().0) else {
        return StatusCode::NO_CONTENT.into_response();
    };
    if !csrf_matches(&session, headers) {
        return csrf_refused().into_response();
    }
    sso.sessions.close(&id);
    let actor = Actor { name: session.name, role: session.role, via: Via::Session };
    let mut entry = gw.audit_entry(Some(&actor), &asked, Outcome::Done, 204);
    entry.note = Some("signed out".into());
    gw.record_audit(entry);
    let secure = redirect_uri(sso.config(), headers).is_some_and(|r| r.starts_with("https:"));
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().append(header::SET_COOKIE, cookie(SESSION_COOKIE, String::new(), "/", 0, secure));
    response
}

/// Whether a cookie-authenticated write carries its session's CSRF token.
pub fn csrf_matches(session: &Session, headers: &HeaderMap) -> bool {
    use sha2::{Digest, Sha256};
    headers
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|sent| Sha256::digest(sent.as_bytes()) == Sha256::digest(session.csrf.as_bytes()))
}

pub fn csrf_refused() -> super::error::ApiError {
    super::error::ApiError::new(
        StatusCode::FORBIDDEN,
        super::error::ErrorType::Permission,
        format!("a write signed in by cookie must send its session's CSRF token in `{CSRF_HEADER}` (GET /admin/api/me gives it)"),
    )
    .code("csrf")
}

fn not_offered() -> Response {
    super::error::ApiError::new(
        StatusCode::NOT_FOUND,
        super::error::ErrorType::NotFound,
        "single sign-on is off: configure access.sso",
    )
    .code("unknown_url")
    .into_response()
}
