//! The response cache in the admin API: its bounds and what it holds now, and purging it.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::server::Gateway;
use crate::server::error::{ApiError, ErrorType};

async fn cache_json(gw: &Gateway) -> Value {
    let (entries, bytes) = gw.cache.size();
    let shared = gw.cache.shared_size().await.map(|(entries, bytes)| json!({"entries": entries, "bytes": bytes}));
    json!({"config": gw.cache.config(), "entries": entries, "bytes": bytes, "shared": shared,
           "semantic_prompts": gw.cache.semantic_size()})
}

/// `GET /admin/api/cache`: the settings, the entries and bytes this process holds, and with
/// `shared_state` those the replicas share in Redis.
pub async fn show(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    Json(cache_json(&gw).await)
}

/// `DELETE /admin/api/cache`: forgets every entry (the replicas' shared ones too); the next
/// request for each goes upstream.
pub async fn purge(State(gw): State<Arc<Gateway>>) -> Result<Json<Value>, ApiError> {
    let purged = gw.cache.purge().await.map_err(|why| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Api,
            format!("this replica's entries are purged, the shared ones are not: {why}"),
        )
    })?;
    tracing::info!(entries = purged, "admin purged the response cache");
    crate::server::audit::note(format!("{purged} cache entries purged"));
    Ok(Json(json!({"purged": purged, "cache": cache_json(&gw).await})))
}
