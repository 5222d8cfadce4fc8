//! The WebUI: `webui/` embedded in the binary and served at `/ui/` (off with the admin API).
//! `index.html` names its assets under `/ui/a/<hash of the whole UI>/`, so they cache for good.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use rust_embed::RustEmbed;
use sha2::{Digest, Sha256};
use std::sync::Arc;

use super::Gateway;
use super::error::{ApiError, ErrorType};

// Debug builds read the folder at run time (edits show on reload); release builds carry it.
#[derive(RustEmbed)]
#[folder = "webui/"]
#[exclude = "README.md"]
struct Assets;

/// Only our own files: no inline script or style, no framing, no other origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
                   connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

const ASSET_PREFIX: &str = "/ui/a/";

pub fn router() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(index))
        .route("/ui/a/{version}/{*path}", get(asset))
}

/// The UI's version: a digest of every file's digest, so any change moves every asset URL.
fn version() -> String {
    fn compute() -> String {
        let mut names: Vec<_> = Assets::iter().collect();
        names.sort();
        let mut all = Sha256::new();
        for name in names {
            if let Some(file) = Assets::get(&name) {
                all.update(name.as_bytes());
                all.update(file.metadata.sha256_hash());
            }
        }
        all.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
    if cfg!(debug_assertions) {
        return compute();
    }
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(compute).clone()
}

async fn index(State(gw): State<Arc<Gateway>>) -> Response {
    if gw.settings.admin_token.secret().is_none() {
        return off();
    }
    let Some(file) = Assets::get("index.html") else { return missing("index.html") };
    let base = format!("{ASSET_PREFIX}{}/", version());
    let html = String::from_utf8_lossy(&file.data).replace("{{BASE}}", &base);
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    secure(&mut response, "no-cache");
    response
}

async fn asset(State(gw): State<Arc<Gateway>>, Path((version_seen, path)): Path<(String, String)>) -> Response {
    if gw.settings.admin_token.secret().is_none() {
        return off();
    }
    if path == "index.html" {
        return missing(&path);
    }
    // A tab opened before an upgrade asks for its own version: mixing its modules with
    // today's would break, so it is told the file is gone and reloads (app.js offers it).
    if version_seen != version() {
        return missing(&path);
    }
    let Some(file) = Assets::get(&path) else { return missing(&path) };
    let mut response = ([(header::CONTENT_TYPE, content_type(&path))], file.data.into_owned()).into_response();
    secure(&mut response, "public, max-age=31536000, immutable");
    response
}

fn secure(response: &mut Response, cache: &'static str) {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("html") => "text/html; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    }
}

fn off() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorType::InvalidRequest,
        "the WebUI is off: admin_token is empty in the config",
    )
    .code("unknown_url")
    .into_response()
}

fn missing(path: &str) -> Response {
    ApiError::new(StatusCode::NOT_FOUND, ErrorType::InvalidRequest, format!("the WebUI has no file {path}"))
        .code("unknown_url")
        .into_response()
}
