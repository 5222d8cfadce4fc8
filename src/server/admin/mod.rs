//! The admin API under `/admin/api/` (and Keyway's `/admin/llm/` paths): every route registered
//! with the role it needs, and one guard that names the caller, checks the role and writes the
//! audit trail. Off (404) without `admin_token`. Changes go through `Gateway::edit`.

mod access;
pub(crate) mod adapters;
mod cache;
mod chains;
mod guard;
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
use axum::extract::{DefaultBodyLimit, Request};
use axum::handler::Handler;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use serde::de::DeserializeOwned;

use super::Gateway;
use super::error::{ApiError, ErrorType};
use crate::domain::Role::{self, Admin, Operator, Viewer};
pub(crate) use guard::{Roles, SessionCsrf, TelegramUser, authenticate};

pub use health::internal;
pub use in_process::InProcess;

/// Routes under one prefix, each with the role it needs: registered together, so no route can
/// exist without one.
struct Guarded {
    prefix: &'static str,
    router: Router<Arc<Gateway>>,
    roles: Roles,
}

impl Guarded {
    fn new(prefix: &'static str) -> Guarded {
        Guarded { prefix, router: Router::new(), roles: Roles::new() }
    }

    fn at<H: Handler<T, Arc<Gateway>>, T: 'static>(self, method: Method, path: &str, role: Role, handler: H) -> Self {
        let filter = MethodFilter::try_from(method.clone()).expect("a method axum routes");
        self.with(method, path, role, on(filter, handler))
    }

    fn with(mut self, method: Method, path: &str, role: Role, endpoint: MethodRouter<Arc<Gateway>>) -> Self {
        self.router = self.router.route(path, endpoint);
        self.roles.insert((method, format!("{}{path}", self.prefix)), role);
        self
    }
}

/// Every admin route and the role it needs. Viewers read; operators intervene (cooldowns,
/// affinity, pausing, switching sources, tests, the playground's key, purging the cache);
/// admins change what the gateway is. Anyone manages their own personal tokens.
fn routes() -> (Router<Arc<Gateway>>, Roles) {
    use Method as M;
    let api = Guarded::new("/admin/api")
        .at(M::GET, "/health", Viewer, health::health)
        .at(M::GET, "/serving", Viewer, health::serving)
        .at(M::PUT, "/serving", Operator, health::set_serving)
        .at(M::POST, "/cooldowns/clear", Operator, health::clear_cooldowns)
        .at(M::POST, "/affinity/clear", Operator, health::clear_affinity)
        .at(M::POST, "/stats/reset", Operator, health::reset_stats)
        .at(M::GET, "/logs", Viewer, health::logs)
        .at(M::GET, "/stats", Viewer, health::stats)
        .at(M::GET, "/stats/series", Viewer, health::series)
        .at(M::GET, "/settings", Viewer, settings::show)
        .at(M::PUT, "/settings", Admin, settings::change)
        .at(M::GET, "/sources", Viewer, sources::list)
        .at(M::POST, "/sources", Admin, sources::create)
        .at(M::GET, "/sources/{name}", Viewer, sources::show)
        .at(M::PUT, "/sources/{name}", Admin, sources::replace)
        .at(M::DELETE, "/sources/{name}", Admin, sources::delete)
        .at(M::POST, "/sources/{name}/test", Operator, sources::test)
        .at(M::POST, "/sources/{name}/detect", Operator, sources::detect)
        .at(M::POST, "/sources/{name}/enable", Operator, sources::enable)
        .at(M::POST, "/sources/{name}/disable", Operator, sources::disable)
        .at(M::GET, "/source-templates", Viewer, sources::list_templates)
        .at(M::POST, "/source-templates", Admin, sources::create_template)
        .at(M::PUT, "/source-templates/{name}", Admin, sources::replace_template)
        .at(M::DELETE, "/source-templates/{name}", Admin, sources::delete_template)
        .at(M::POST, "/source-templates/{name}/sources", Admin, sources::from_template)
        .at(M::GET, "/adapters", Viewer, adapters::list)
        .at(M::GET, "/adapters/{name}/source", Viewer, adapters::source)
        .with(M::PUT, "/adapters/{name}", Admin, upload(adapters::upload, adapters::MAX_UPLOAD))
        .at(M::DELETE, "/adapters/{name}", Admin, adapters::delete)
        .at(M::GET, "/auto", Viewer, chains::chat)
        .at(M::PUT, "/auto", Admin, chains::set_chat)
        .at(M::GET, "/auto-image", Viewer, chains::image)
        .at(M::PUT, "/auto-image", Admin, chains::set_image)
        .at(M::GET, "/routes", Viewer, routes::list)
        .at(M::POST, "/routes", Admin, routes::create)
        .at(M::GET, "/routes/{id}", Viewer, routes::show)
        .at(M::PUT, "/routes/{id}", Admin, routes::replace)
        .at(M::DELETE, "/routes/{id}", Admin, routes::delete)
        .at(M::GET, "/routes/{id}/providers", Viewer, routes::providers)
        .at(M::POST, "/routes/{id}/providers", Admin, routes::add_provider)
        .at(M::PATCH, "/route-providers/{id}", Admin, routes::update_provider)
        .at(M::DELETE, "/route-providers/{id}", Admin, routes::remove_provider)
        .at(M::GET, "/keys", Viewer, keys::list)
        .at(M::POST, "/keys", Admin, keys::create)
        .at(M::GET, "/keys/{name}", Viewer, keys::show)
        .at(M::PATCH, "/keys/{name}", Admin, keys::update)
        .at(M::DELETE, "/keys/{name}", Admin, keys::delete)
        .at(M::POST, "/playground-key", Operator, keys::playground)
        .at(M::GET, "/prices", Viewer, money::list)
        .at(M::PUT, "/prices", Admin, money::set)
        .at(M::DELETE, "/prices", Admin, money::delete)
        .at(M::GET, "/spend", Viewer, money::spend)
        .at(M::GET, "/budgets", Viewer, money::budgets)
        .at(M::GET, "/cache", Viewer, cache::show)
        .at(M::DELETE, "/cache", Operator, cache::purge)
        .at(M::GET, "/policies", Viewer, policies::list)
        .at(M::PUT, "/policies/{name}", Admin, policies::define)
        .at(M::DELETE, "/policies/{name}", Admin, policies::delete)
        .with(M::PUT, "/policies/{name}/component", Admin, upload(policies::upload, policies::MAX_UPLOAD))
        .at(M::GET, "/me", Viewer, access::me)
        .at(M::GET, "/tokens", Viewer, access::list)
        .at(M::POST, "/tokens", Viewer, access::create)
        .at(M::DELETE, "/tokens/{id}", Viewer, access::revoke)
        .at(M::GET, "/audit", Viewer, access::audit)
        .at(M::GET, "/openapi.json", Viewer, openapi::document);
    // Keyway's paths for the same operations, so its tooling keeps working.
    let keyway = Guarded::new("/admin/llm")
        .at(M::GET, "/routes/{id}/providers", Viewer, routes::providers)
        .at(M::POST, "/routes/{id}/providers", Admin, routes::add_provider)
        .at(M::PATCH, "/route-providers/{id}", Admin, routes::update_provider)
        .at(M::DELETE, "/route-providers/{id}", Admin, routes::remove_provider)
        .at(M::GET, "/health", Viewer, health::health)
        .at(M::POST, "/health/{provider}/reset", Operator, routes::reset_provider);
    let mut roles = api.roles;
    roles.extend(keyway.roles);
    (Router::new().nest(api.prefix, api.router).nest(keyway.prefix, keyway.router), roles)
}

/// A PUT taking a body up to `limit` bytes (a component).
fn upload<H: Handler<T, Arc<Gateway>>, T: 'static>(handler: H, limit: usize) -> MethodRouter<Arc<Gateway>> {
    axum::routing::put(handler).layer(DefaultBodyLimit::max(limit))
}

/// Admin routes (JSON bodies up to axum's 2 MiB default; uploads up to their own limits).
pub fn router(gateway: Arc<Gateway>) -> Router<Arc<Gateway>> {
    let (router, roles) = routes();
    router
        .route_layer(axum::middleware::from_fn_with_state((gateway, Arc::new(roles)), guard::guard))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented API and the routed one are the same set, each route with the role
    /// openapi.json's `x-role` says.
    #[test]
    fn every_documented_route_has_its_role_and_every_routed_one_is_documented() {
        let (_, roles) = routes();
        let doc: serde_json::Value = serde_json::from_str(include_str!("openapi.json")).unwrap();
        let mut documented = std::collections::BTreeSet::new();
        for (path, methods) in doc["paths"].as_object().unwrap() {
            for (method, operation) in methods.as_object().unwrap() {
                let role = operation["x-role"].as_str().unwrap_or("none").to_string();
                documented.insert((method.to_uppercase(), path.clone(), role));
            }
        }
        let routed: std::collections::BTreeSet<(String, String, String)> =
            roles.iter().map(|((m, p), role)| (m.to_string(), p.clone(), role.to_string())).collect();
        let undocumented: Vec<_> = routed.difference(&documented).collect();
        let unrouted: Vec<_> = documented.difference(&routed).collect();
        assert!(
            undocumented.is_empty() && unrouted.is_empty(),
            "routed, not in openapi.json: {undocumented:?}; documented, not routed: {unrouted:?}"
        );
    }
}
