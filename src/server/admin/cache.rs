//! The response cache in the admin API: its bounds and what it holds now, and purging it.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::server::Gateway;

fn cache_json(gw: &Gateway) -> Value {
    let (entries, bytes) = gw.cache.size();
    json!({"config": gw.cache.config(), "entries": entries, "bytes": bytes})
}

/// `GET /admin/api/cache`: the settings, and the entries and bytes this process holds.
pub async fn show(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    Json(cache_json(&gw))
}

/// `DELETE /admin/api/cache`: forgets every entry; the next request for each goes upstream.
pub async fn purge(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let (entries, _) = gw.cache.size();
    gw.cache.purge();
    tracing::info!(entries, "admin purged the response cache");
    Json(json!({"purged": entries, "cache": cache_json(&gw)}))
}
