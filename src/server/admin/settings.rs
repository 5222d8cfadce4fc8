//! Gateway-wide settings an operator changes live: how the candidates of one tier are ordered
//! (`channel_selection`), kept in the runtime file.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::body;
use crate::config::ChannelSelection;
use crate::server::Gateway;
use crate::server::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    channel_selection: Option<ChannelSelection>,
}

/// `GET /admin/api/settings`.
pub async fn show(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let runtime = gw.runtime();
    Json(json!({
        "channel_selection": gw.scheduler.selection(),
        "default_model": runtime.config.settings.default_model,
    }))
}

/// `PUT /admin/api/settings` with `{"channel_selection": "smart" | "order" | "priority" | "cheapest"}`.
pub async fn change(State(gw): State<Arc<Gateway>>, bytes: Bytes) -> Result<Json<Value>, ApiError> {
    let change: Change = body(&bytes)?;
    if let Some(selection) = change.channel_selection {
        gw.edit(|file, _| {
            file.channel_selection = Some(selection);
            Ok(())
        })
        .await?;
        tracing::info!(?selection, "admin changed the channel selection");
    }
    Ok(show(State(gw)).await)
}
