//! The AUTO chains: `auto` (chat) and `auto-image`, read and replaced whole.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::body;
use crate::config::SlotConfig;
use crate::server::Gateway;
use crate::server::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Chain {
    /// `null` (image chain only): no chain, every image model in config order.
    slots: Option<Vec<SlotConfig>>,
}

pub async fn chat(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    Json(json!({"slots": gw.runtime().file.auto}))
}

pub async fn image(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    Json(json!({"slots": gw.runtime().file.auto_image}))
}

/// `PUT /admin/api/auto` with `{"slots": [...]}`.
pub async fn set_chat(State(gw): State<Arc<Gateway>>, bytes: Bytes) -> Result<Json<Value>, ApiError> {
    let chain: Chain = body(&bytes)?;
    let slots = chain.slots.ok_or_else(|| ApiError::invalid_request("`slots` must be a list").param("slots"))?;
    let count = slots.len();
    gw.edit(|file, _| {
        file.auto = slots;
        Ok(())
    })
    .await?;
    tracing::info!(slots = count, "admin replaced the AUTO chat chain");
    Ok(chat(State(gw)).await)
}

/// `PUT /admin/api/auto-image` with `{"slots": [...]}` or `{"slots": null}`.
pub async fn set_image(State(gw): State<Arc<Gateway>>, bytes: Bytes) -> Result<Json<Value>, ApiError> {
    let chain: Chain = body(&bytes)?;
    gw.edit(|file, _| {
        file.auto_image = chain.slots;
        Ok(())
    })
    .await?;
    tracing::info!("admin replaced the AUTO image chain");
    Ok(image(State(gw)).await)
}
