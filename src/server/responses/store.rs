//! The Responses door's memory: a turn stored when it completes (`store` not false), and the
//! conversation behind a `previous_response_id` read back, only ever for the key that made it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::Value;

use crate::server::Gateway;
use crate::server::error::{ApiError, ErrorType};
use crate::state::StoredResponse;

/// Turns one conversation may chain (a longer one is refused, not walked).
const MAX_TURNS: usize = 1000;

/// Milliseconds in a day: stored bytes are counted per UTC day.
const DAY_MS: u64 = 86_400_000;

/// What each key (by id) stored today, counted as turns are stored; read from the database
/// once (at the first request that may store, or the first admin look) for turns stored today
/// before this process started.
#[derive(Default)]
pub struct StoredBudget {
    /// (the day it counts, whether the database was read for it, bytes by key id)
    today: Mutex<(u64, bool, HashMap<String, u64>)>,
}

impl StoredBudget {
    /// Reads today's stored bytes from the database unless already read today.
    pub async fn load(&self, gw: &Arc<Gateway>) {
        let day = gw.scheduler.now().0 / DAY_MS;
        if self.lock_for(day).1 {
            return;
        }
        let state = gw.state.clone();
        let read = tokio::task::spawn_blocking(move || state.stored_response_bytes(day * DAY_MS)).await;
        let mut today = self.today.lock().unwrap_or_else(|p| p.into_inner());
        match read {
            // Midnight passed while reading: the rows are another day's, the next request reads.
            _ if today.0 != day => {}
            Ok(Ok(rows)) if !today.1 => {
                // What this process counted already is in the database too (it was flushed
                // before the read): the larger figure of the two, never their sum.
                for (owner, bytes) in rows {
                    let counted = today.2.entry(owner).or_default();
                    *counted = (*counted).max(bytes);
                }
                today.1 = true;
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("stored responses: today's bytes not read: {e}"),
            Err(e) => tracing::warn!("stored responses: today's bytes not read: {e}"),
        }
    }

    /// Bytes the key with id `owner` stored today.
    pub fn used(&self, gw: &Gateway, owner: &str) -> u64 {
        let day = gw.scheduler.now().0 / DAY_MS;
        self.lock_for(day).2.get(owner).copied().unwrap_or(0)
    }

    /// Counts `bytes` for `owner` when they fit under `limit` today; false (nothing counted)
    /// when they do not.
    fn take(&self, gw: &Gateway, owner: &str, bytes: u64, limit: u64) -> bool {
        let day = gw.scheduler.now().0 / DAY_MS;
        let mut today = self.lock_for(day);
        let used = today.2.entry(owner.to_string()).or_default();
        if used.saturating_add(bytes) > limit {
            return false;
        }
        *used += bytes;
        true
    }

    fn lock_for(&self, day: u64) -> std::sync::MutexGuard<'_, (u64, bool, HashMap<String, u64>)> {
        let mut today = self.today.lock().unwrap_or_else(|p| p.into_inner());
        if day > today.0 {
            // A new day (never an older one, asked late): what was stored before midnight is
            // yesterday's; the database is read again for what an earlier run stored today.
            *today = (day, false, HashMap::new());
        }
        today
    }
}

/// Why a request's turn will not be stored, known before it is sent: too large to store, or
/// the key stored its day's bytes already. `None`: it may be stored.
pub async fn refusal(gw: &Arc<Gateway>, owner: &str, request_bytes: usize) -> Option<ApiError> {
    let limits = &gw.settings.stored_responses;
    if request_bytes as u64 > limits.max_turn_bytes() {
        return Some(
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorType::InvalidRequest,
                format!(
                    "store: a stored turn is at most {} KiB (stored_responses.max_turn_kb) and this request is larger; send it with store: false",
                    limits.max_turn_kb
                ),
            )
            .code("turn_too_large_to_store")
            .param("store"),
        );
    }
    gw.stored_budget.load(gw).await;
    let used = gw.stored_budget.used(gw, owner);
    // The request's own bytes are the least its turn will take.
    (used.saturating_add(request_bytes as u64) > limits.max_bytes_per_key_per_day()).then(|| {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorType::RateLimit,
            format!(
                "store: this key stored its {} MiB of responses for today (stored_responses.max_mb_per_key_per_day); send store: false, or wait until 00:00 UTC",
                limits.max_mb_per_key_per_day
            ),
        )
        .code("stored_responses_quota_exceeded")
        .param("store")
    })
}

/// One request's turn, stored once its response completes.
pub struct Turn {
    pub gw: Arc<Gateway>,
    /// The id of the key that made it (its owner) and the key's name.
    pub owner: String,
    pub key: String,
    pub previous: Option<String>,
    /// This turn's own input items (not the replayed history).
    pub input: Vec<Value>,
    pub store: bool,
    /// The answer came through the unified form: only the input items it carries went
    /// upstream, and only those are stored.
    pub translated: bool,
}

impl Turn {
    /// Keeps `response` (a completed or incomplete `response` object) with this turn's input:
    /// what went upstream, within `stored_responses.max_turn_kb` and the key's bytes for today.
    pub fn save(self, response: &Value) {
        let id = response["id"].as_str().unwrap_or_default();
        let status = response["status"].as_str().unwrap_or_default();
        if !self.store || id.is_empty() || !matches!(status, "completed" | "incomplete") {
            return;
        }
        let translated = self.translated;
        let mut items: Vec<Value> =
            self.input.into_iter().filter(|item| !translated || super::request::translated_item(item)).collect();
        items.extend(response["output"].as_array().into_iter().flatten().cloned());
        let stored = StoredResponse {
            owner: self.owner,
            id: id.to_string(),
            key: self.key,
            created_ms: self.gw.scheduler.now().0,
            previous: self.previous,
            items: Value::Array(items).to_string(),
            response: response.to_string(),
        };
        let limits = &self.gw.settings.stored_responses;
        let bytes = stored.bytes();
        if bytes > limits.max_turn_bytes() {
            tracing::warn!(bytes, "responses: a turn larger than stored_responses.max_turn_kb is not stored");
            return;
        }
        if !self.gw.stored_budget.take(&self.gw, &stored.owner, bytes, limits.max_bytes_per_key_per_day()) {
            tracing::warn!(key = %stored.key, bytes, "responses: the key stored its bytes for today (stored_responses.max_mb_per_key_per_day); this turn is not stored");
            return;
        }
        self.gw.state.store_response(stored);
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

/// A stored response made by the key with id `owner`; 404 otherwise (another key's turns do
/// not exist for it).
pub async fn owned(gw: &Arc<Gateway>, owner: &str, id: &str) -> Result<StoredResponse, ApiError> {
    let (state, owner, wanted) = (gw.state.clone(), owner.to_string(), id.to_string());
    let found = tokio::task::spawn_blocking(move || state.response(&owner, &wanted))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorType::Api, e.to_string()))?
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorType::Api, e.to_string()))?;
    found.ok_or_else(|| not_found(id).code("response_not_found").param("id"))
}

/// Every item of the conversation up to and including turn `id`, oldest first: each turn's
/// input, then its output. At most `limit` bytes and [`MAX_TURNS`] turns.
pub async fn history(gw: &Arc<Gateway>, owner: &str, id: &str, limit: usize) -> Result<Vec<Value>, ApiError> {
    let mut turns: Vec<String> = Vec::new();
    let mut bytes = 0usize;
    let mut next = Some(id.to_string());
    // An upstream that repeats its ids can make a turn continue itself: walked once, not 1,000 times.
    let mut seen = std::collections::HashSet::new();
    while let Some(at) = next.take() {
        if !seen.insert(at.clone()) {
            break;
        }
        if turns.len() >= MAX_TURNS {
            return Err(ApiError::invalid_request(format!(
                "previous_response_id: the conversation is longer than {MAX_TURNS} turns; send its input whole"
            ))
            .param("previous_response_id"));
        }
        let turn = match owned(gw, owner, &at).await {
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
