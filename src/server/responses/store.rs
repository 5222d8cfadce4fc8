//! The Responses door's memory: a turn stored when it completes (`store` not false), and the
//! conversation behind a `previous_response_id` read back, only ever for the key that made it.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;

use crate::server::Gateway;
use crate::server::error::{ApiError, ErrorType};
use crate::state::StoredResponse;

/// Turns one conversation may chain (a longer one is refused, not walked).
const MAX_TURNS: usize = 1000;

/// One request's turn, stored once its response completes.
pub struct Turn {
    pub gw: Arc<Gateway>,
    pub key: String,
    pub previous: Option<String>,
    /// This turn's own input items (not the replayed history).
    pub input: Vec<Value>,
    pub store: bool,
}

impl Turn {
    /// Keeps `response` (a completed or incomplete `response` object) with this turn's input.
    pub fn save(self, response: &Value) {
        let id = response["id"].as_str().unwrap_or_default();
        let status = response["status"].as_str().unwrap_or_default();
        if !self.store || id.is_empty() || !matches!(status, "completed" | "incomplete") {
            return;
        }
        let mut items = self.input;
        items.extend(response["output"].as_array().into_iter().flatten().cloned());
        let items = Value::Array(items).to_string();
        let limit = self.gw.settings.body_limit_bytes;
        if items.len() > limit {
            tracing::warn!(bytes = items.len(), "responses: a turn larger than body_limit_mb is not stored");
            return;
        }
        self.gw.state.store_response(StoredResponse {
            id: id.to_string(),
            key: self.key,
            created_ms: self.gw.scheduler.now().0,
            previous: self.previous,
            items,
            response: response.to_string(),
        });
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorType::InvalidRequest,
        format!("Previous response with id '{id}' not found (unknown, made with another key, or past response_retention_days)."),
    )
    .code("previous_response_not_found")
    .param("previous_response_id")
}

/// A stored response made with `key`; 404 otherwise (another key's turns do not exist for it).
pub async fn owned(gw: &Arc<Gateway>, key: &str, id: &str) -> Result<StoredResponse, ApiError> {
    let (state, wanted) = (gw.state.clone(), id.to_string());
    let found = tokio::task::spawn_blocking(move || state.response(&wanted))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorType::Api, e.to_string()))?
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorType::Api, e.to_string()))?;
    match found {
        Some(stored) if stored.key == key => Ok(stored),
        _ => Err(not_found(id).code("response_not_found").param("id")),
    }
}

/// Every item of the conversation up to and including turn `id`, oldest first: each turn's
/// input, then its output. At most `limit` bytes and [`MAX_TURNS`] turns.
pub async fn history(gw: &Arc<Gateway>, key: &str, id: &str, limit: usize) -> Result<Vec<Value>, ApiError> {
    let mut turns: Vec<String> = Vec::new();
    let mut bytes = 0usize;
    let mut next = Some(id.to_string());
    while let Some(at) = next.take() {
        if turns.len() >= MAX_TURNS {
            return Err(ApiError::invalid_request(format!(
                "previous_response_id: the conversation is longer than {MAX_TURNS} turns; send its input whole"
            ))
            .param("previous_response_id"));
        }
        let turn = match owned(gw, key, &at).await {
            Ok(turn) => turn,
            Err(_) => return Err(not_found(&at)),
        };
        bytes += turn.items.len();
        if bytes > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorType::InvalidRequest,
                "previous_response_id: the conversation behind it is larger than body_limit_mb",
            )
            .code("request_too_large"));
        }
        next = turn.previous.clone();
        turns.push(turn.items);
    }
    let mut items = Vec::new();
    for turn in turns.iter().rev() {
        if let Ok(Value::Array(turn)) = serde_json::from_str::<Value>(turn) {
            items.extend(turn);
        }
    }
    Ok(items)
}
