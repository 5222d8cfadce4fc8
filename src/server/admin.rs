//! The admin API under `/admin/api/` (token in `Authorization: Bearer` or `X-Admin-Token`):
//! slot health and clearing cooldowns. Off when no `admin_token` is configured.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::Gateway;
use super::error::ApiError;
use crate::scheduler::{Admission, probe_budget};

fn authorize(gw: &Gateway, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &gw.config.admin_token else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "the admin API is off: set admin_token in the config",
        ));
    };
    let sent = headers.get("x-admin-token").and_then(|v| v.to_str().ok()).or_else(|| {
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    });
    // Compare digests, so the comparison takes the same time whatever the guess.
    let matches =
        sent.is_some_and(|s| Sha256::digest(s.trim().as_bytes()) == Sha256::digest(token.expose().as_bytes()));
    if matches {
        Ok(())
    } else {
        Err(ApiError::new(StatusCode::UNAUTHORIZED, "authentication_error", "admin token missing or wrong"))
    }
}

/// `GET /admin/api/health`: every slot that is not plainly healthy.
pub async fn health(State(gw): State<Arc<Gateway>>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    authorize(&gw, &headers)?;
    let now = gw.scheduler.now();
    let slots: Vec<Value> = gw
        .scheduler
        .health()
        .into_iter()
        .map(|(key, h)| {
            let max_concurrent =
                gw.config.sources.iter().find(|s| s.name == key.source).map_or(1, |s| s.max_concurrent);
            let state = match (h.admission(now, max_concurrent), h.probes_in_flight) {
                (_, n) if n > 0 => "probing",
                (Admission::Healthy, _) => "healthy",
                (Admission::Probe, _) => "awaiting probe",
                (Admission::Closed, _) => "cooling",
            };
            json!({
                "source": key.source, "model": key.model, "state": state, "failures": h.failures,
                "window_start_ms": h.window.map(|w| w.start.0),
                "probe_from_ms": h.window.and_then(|w| w.probe_from()).map(|t| t.0),
                "recovers_at_ms": h.window.and_then(|w| w.until).map(|t| t.0),
                "probes_in_flight": h.probes_in_flight, "probe_budget": probe_budget(max_concurrent),
            })
        })
        .collect();
    Ok(Json(json!({"now_ms": now.0, "slots": slots})))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClearRequest {
    source: Option<String>,
    model: Option<String>,
}

/// `POST /admin/api/cooldowns/clear` with `{}` (all), `{"source"}`, `{"model"}` or both.
pub async fn clear_cooldowns(
    State(gw): State<Arc<Gateway>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    authorize(&gw, &headers)?;
    let request: ClearRequest =
        if body.is_empty() { ClearRequest::default() } else { super::request::parse_json(&body)? };
    let cleared = gw.scheduler.clear(request.source.as_deref(), request.model.as_deref());
    tracing::info!(cleared, source = ?request.source, model = ?request.model, "admin cleared cooldowns");
    Ok(Json(json!({"cleared": cleared})))
}
