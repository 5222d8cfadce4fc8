//! The admin API under `/admin/api/` (and Keyway's `/admin/llm/` paths): the admin token in
//! `Authorization: Bearer` or `X-Admin-Token`, checked once for every path. Off (404) without
//! `admin_token`. Every change goes through `Gateway::edit`: validated, persisted, swapped in.

pub(crate) mod adapters;
mod cache;
mod chains;
mod health;
mod in_process;
mod keys;
mod money;
mod openapi;
pub(crate) mod policies;
mod routes;
mod settings;
mod sources;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use super::Gateway;
use super::error::{ApiError, ErrorType};

pub use health::internal;
pub use in_process::InProcess;

/// Admin routes (JSON bodies up to axum's 2 MiB default; adapter uploads up to 64 MiB).
pub fn router(gateway: Arc<Gateway>) -> Router<Arc<Gateway>> {
    let api = Router::new()
        .route("/health", get(health::health))
        .route("/serving", get(health::serving).put(health::set_serving))
        .route("/cooldowns/clear", post(health::clear_cooldowns))
        .route("/affinity/clear", post(health::clear_affinity))
        .route("/stats/reset", post(health::reset_stats))
        .route("/logs", get(health::logs))
        .route("/stats", get(health::stats))
        .route("/stats/series", get(health::series))
        .route("/settings", get(settings::show).put(settings::change))
        .route("/sources", get(sources::list).post(sources::create))
        .route("/sources/{name}", get(sources::show).put(sources::replace).delete(sources::delete))
        .route("/sources/{name}/test", post(sources::test))
        .route("/sources/{name}/detect", post(sources::detect))
        .route("/source-templates", get(sources::list_templates).post(sources::create_template))
        .route("/source-templates/{name}", put(sources::replace_template).delete(sources::delete_template))
        .route("/source-templates/{name}/sources", post(sources::from_template))
        .route("/adapters", get(adapters::list))
        .route("/adapters/{name}/source", get(adapters::source))
        .route(
            "/adapters/{name}",
            put(adapters::upload).delete(adapters::delete).layer(DefaultBodyLimit::max(adapters::MAX_UPLOAD)),
        )
        .route("/auto", get(chains::chat).put(chains::set_chat))
        .route("/auto-image", get(chains::image).put(chains::set_image))
        .route("/routes", get(routes::list).post(routes::create))
        .route("/routes/{id}", get(routes::show).put(routes::replace).delete(routes::delete))
        .route("/routes/{id}/providers", get(routes::providers).post(routes::add_provider))
        .route("/route-providers/{id}", axum::routing::patch(routes::update_provider).delete(routes::remove_provider))
        .route("/keys", get(keys::list).post(keys::create))
        .route("/keys/{name}", get(keys::show).patch(keys::update).delete(keys::delete))
        .route("/prices", get(money::list).put(money::set).delete(money::delete))
        .route("/spend", get(money::spend))
        .route("/budgets", get(money::budgets))
        .route("/cache", get(cache::show).delete(cache::purge))
        .route("/policies", get(policies::list))
        .route("/policies/{name}", put(policies::define).delete(policies::delete))
        .route(
            "/policies/{name}/component",
            put(policies::upload).layer(axum::extract::DefaultBodyLimit::max(policies::MAX_UPLOAD)),
        )
        .route("/openapi.json", get(openapi::document));
    // Keyway's paths for the same operations, so its tooling keeps working.
    let keyway = Router::new()
        .route("/routes/{id}/providers", get(routes::providers).post(routes::add_provider))
        .route("/route-providers/{id}", axum::routing::patch(routes::update_provider).delete(routes::remove_provider))
        .route("/health", get(health::health))
        .route("/health/{provider}/reset", post(routes::reset_provider));
    Router::new()
        .nest("/admin/api", api)
        .nest("/admin/llm", keyway)
        .route_layer(axum::middleware::from_fn_with_state(gateway, require_admin))
        .layer(axum::middleware::from_fn(json_errors))
}

/// axum's own rejections (a body over the limit, a wrong method) are plain text: admin clients
/// get them as error JSON like every other admin error.
async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 4096).await.unwrap_or_default();
    let message = String::from_utf8_lossy(&text).trim().to_string();
    let message = if message.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { message };
    let error = ApiError::new(status, ErrorType::InvalidRequest, message);
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => error.code("request_too_large"),
        _ => error,
    }
    .into_response()
}

async fn require_admin(State(gw): State<Arc<Gateway>>, request: Request, next: Next) -> Response {
    // The bot calls in-process, with no peer address: only HTTP peers are throttled.
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| super::throttle::client_of(c.0.ip(), request.headers()));
    match authorize_peer(&gw, request.headers(), peer) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// [`authorize`], for a request from `peer`: a peer that sent too many wrong tokens lately is
/// turned away (429) before its next token is even compared. A request without a token is not
/// a guess: it gets its 401.
fn authorize_peer(gw: &Gateway, headers: &HeaderMap, peer: Option<std::net::IpAddr>) -> Result<(), ApiError> {
    let sent = headers.contains_key("x-admin-token") || headers.contains_key(header::AUTHORIZATION);
    let Some(peer) = peer.filter(|_| sent) else { return authorize(gw, headers) };
    let now = gw.scheduler.now();
    if let Some(wait) = gw.auth_failures.wait(peer, now) {
        return Err(super::throttle::turned_away(wait));
    }
    let verdict = authorize(gw, headers);
    if verdict.as_ref().is_err_and(|e| e.status == StatusCode::UNAUTHORIZED) {
        gw.auth_failures.failed(peer, now);
    }
    verdict
}

pub(crate) fn authorize(gw: &Gateway, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = gw.settings.admin_token.secret() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorType::InvalidRequest,
            "the admin API is off: admin_token is empty in the config",
        ));
    };
    let sent = headers.get("x-admin-token").and_then(|v| v.to_str().ok()).or_else(|| {
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    });
    // Compare digests, so the comparison takes the same time whatever the guess.
    let matches =
        sent.is_some_and(|s| Sha256::digest(s.trim().as_bytes()) == Sha256::digest(token.expose().as_bytes()));
    if matches {
        return Ok(());
    }
    // Where a made token is: the file's name, not the host's path, to whoever asks.
    let message = match gw.settings.admin_token {
        crate::config::AdminToken::Stored(..) => {
            "admin token missing or wrong: the gateway made it at its first start and keeps it in the file `admin_token` in its data_dir (the start's log says where)"
        }
        _ => "admin token missing or wrong: it is the config's `admin_token`",
    };
    Err(ApiError::new(StatusCode::UNAUTHORIZED, ErrorType::Authentication, message))
}

/// A JSON body, with type errors naming the field.
fn body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    super::request::parse_json(bytes)
}

fn not_found(what: &str, name: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, ErrorType::NotFound, format!("no {what} named `{name}`")).code("not_found")
}

fn conflict(message: String) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, ErrorType::InvalidRequest, message).code("conflict")
}
