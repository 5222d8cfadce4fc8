//! Admin views of the scheduler and the logs: slot health, clearing cooldowns and affinity,
//! resetting scores, request logs and their statistics.

use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::scheduler::{Admission, SlotKey, probe_budget, score};
use crate::server::Gateway;
use crate::server::error::{ApiError, ErrorType};
use crate::state::LogQuery;

/// `GET /admin/api/health`: every configured (source, model) with its cooldown state, score
/// and, for AUTO slots with a token quota, the quota's use in the current window.
pub async fn health(State(gw): State<Arc<Gateway>>) -> Result<Json<Value>, ApiError> {
    let scheduler = &gw.scheduler;
    let now = scheduler.now();
    let runtime = gw.runtime();
    let config = &runtime.config;
    let mut slots = Vec::new();
    for source in &config.sources {
        for model in &source.models {
            let key = SlotKey { source: source.name.clone(), model: model.name.clone() };
            let h = scheduler.health_of(&key).unwrap_or_default();
            let probe_after = scheduler.policy().cooldown.probe_after();
            let state = match (h.admission(now, source.max_concurrent, probe_after), h.probes_in_flight) {
                _ if !source.enabled => "disabled",
                (_, n) if n > 0 => "probing",
                (Admission::Healthy, _) => "healthy",
                (Admission::Probe, _) => "awaiting probe",
                (Admission::Closed, _) => "cooling",
            };
            let stats = scheduler.stats_of(&key);
            let quotas: Vec<Value> = config
                .auto
                .chat
                .iter()
                .chain(config.auto.image.iter().flatten())
                .filter(|s| s.model == key.model && s.source.as_ref().is_none_or(|n| *n == key.source))
                .filter_map(|s| s.quota.map(|q| (s.tier, q)))
                .map(|(tier, q)| {
                    json!({
                        "tier": tier, "period": q.period.to_string(), "token_quota": q.tokens,
                        "used": scheduler.quota_used(&key, q.period),
                        "resets_at_ms": q.period.window(now).1.map(|t| t.0),
                    })
                })
                .collect();
            slots.push(json!({
                "source": key.source, "model": key.model, "state": state, "failures": h.failures,
                "window_start_ms": h.window.map(|w| w.start.0),
                "probe_from_ms": h.window.map(|w| w.probe_from(probe_after).0),
                "recovers_at_ms": h.window.and_then(|w| w.until).map(|t| t.0),
                "probes_in_flight": h.probes_in_flight, "probe_budget": probe_budget(source.max_concurrent),
                "score": score(stats.as_ref(), now, &scheduler.policy().scoring).round(),
                "requests": stats.as_ref().map_or(0, |s| s.total),
                "successes": stats.as_ref().map_or(0, |s| s.successes),
                "quotas": quotas,
            }));
        }
    }
    Ok(Json(json!({"now_ms": now.0, "replica": replica(&gw), "slots": slots})))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClearRequest {
    source: Option<String>,
    model: Option<String>,
}

impl ClearRequest {
    /// What the request narrowed to, for the audit trail.
    fn scope(&self) -> String {
        match (&self.source, &self.model) {
            (None, None) => String::new(),
            (source, model) => format!(
                " for{}{}",
                source.as_ref().map(|s| format!(" source {s}")).unwrap_or_default(),
                model.as_ref().map(|m| format!(" model {m}")).unwrap_or_default()
            ),
        }
    }
}

fn clear_request(body: &[u8]) -> Result<ClearRequest, ApiError> {
    if body.is_empty() { Ok(ClearRequest::default()) } else { crate::server::request::parse_json(body) }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServingChange {
    paused: bool,
}

/// `GET /admin/api/serving`: whether `/v1` requests are served or paused.
pub async fn serving(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    Json(json!({"paused": gw.paused()}))
}

/// `PUT /admin/api/serving` with `{"paused": true}` to refuse `/v1` requests (503
/// `serving_paused`) until `{"paused": false}`; requests in flight finish.
pub async fn set_serving(State(gw): State<Arc<Gateway>>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let change: ServingChange = crate::server::request::parse_json(&body)?;
    gw.set_paused(change.paused);
    crate::server::audit::note(if change.paused { "serving paused" } else { "serving resumed" });
    Ok(Json(json!({"paused": gw.paused()})))
}

/// `POST /admin/api/cooldowns/clear` with `{}` (all), `{"source"}`, `{"model"}` or both.
pub async fn clear_cooldowns(State(gw): State<Arc<Gateway>>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let request = clear_request(&body)?;
    let cleared = gw.scheduler.clear(request.source.as_deref(), request.model.as_deref());
    tracing::info!(cleared, source = ?request.source, model = ?request.model, "admin cleared cooldowns");
    crate::server::audit::note(format!("{cleared} cooldowns cleared{}", request.scope()));
    Ok(Json(json!({"cleared": cleared})))
}

/// `POST /admin/api/affinity/clear` with `{}` (all) or `{"source"}`.
pub async fn clear_affinity(State(gw): State<Arc<Gateway>>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let request = clear_request(&body)?;
    if request.model.is_some() {
        return Err(ApiError::invalid_request("affinity is cleared by source only").param("model"));
    }
    let cleared = gw.scheduler.clear_affinity(request.source.as_deref());
    tracing::info!(cleared, source = ?request.source, "admin cleared affinity bindings");
    crate::server::audit::note(format!("{cleared} affinity bindings cleared{}", request.scope()));
    Ok(Json(json!({"cleared": cleared})))
}

/// `POST /admin/api/stats/reset` with `{}` (all), `{"source"}`, `{"model"}` or both.
pub async fn reset_stats(State(gw): State<Arc<Gateway>>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    let request = clear_request(&body)?;
    let reset = gw.scheduler.reset_stats(request.source.as_deref(), request.model.as_deref());
    tracing::info!(reset, source = ?request.source, model = ?request.model, "admin reset scorer stats");
    crate::server::audit::note(format!("{reset} scorer stats reset{}", request.scope()));
    Ok(Json(json!({"reset": reset})))
}

/// `GET /admin/api/logs?key=&route=&mode=&source=&model=&status=&errors=&request_id=&fusion_id=&since_ms=&until_ms=&limit=&offset=`:
/// request-log rows, newest first, with the total that match.
pub async fn logs(State(gw): State<Arc<Gateway>>, RawQuery(query): RawQuery) -> Result<Json<Value>, ApiError> {
    let query: LogQuery = serde_urlencoded::from_str(query.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::invalid_request(format!("bad log query: {e}")))?;
    let state = gw.state.clone();
    let page = tokio::task::spawn_blocking(move || state.query_logs(&query))
        .await
        .map_err(|e| internal(e.to_string()))?
        .map_err(|e| internal(e.to_string()))?;
    Ok(Json(serde_json::to_value(page).expect("log rows serialize")))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StatsQuery {
    since_ms: Option<u64>,
}

/// `GET /admin/api/stats?since_ms=`: per (source, model) requests, errors, tokens and average
/// latencies from the request logs (default: the last 24 hours).
pub async fn stats(State(gw): State<Arc<Gateway>>, RawQuery(query): RawQuery) -> Result<Json<Value>, ApiError> {
    let query: StatsQuery = serde_urlencoded::from_str(query.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::invalid_request(format!("bad stats query: {e}")))?;
    let since = query.since_ms.unwrap_or(gw.scheduler.now().0.saturating_sub(86_400_000));
    let state = gw.state.clone();
    let rows = tokio::task::spawn_blocking(move || state.log_stats(since))
        .await
        .map_err(|e| internal(e.to_string()))?
        .map_err(|e| internal(e.to_string()))?;
    Ok(Json(json!({"since_ms": since, "replica": replica(&gw), "sources": rows})))
}

/// Which replica answers, and how its link to the others stands (`null` on its own).
fn replica(gw: &Gateway) -> Value {
    gw.shared.as_ref().map_or(Value::Null, |shared| serde_json::to_value(shared.status()).expect("status serialises"))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeriesQuery {
    since_ms: Option<u64>,
    until_ms: Option<u64>,
    buckets: Option<u32>,
}

/// `GET /admin/api/stats/series?since_ms=&until_ms=&buckets=`: attempts, errors, tokens and
/// p50/p95 latency per time bucket (default: the last hour in 60 buckets; at most 500).
pub async fn series(State(gw): State<Arc<Gateway>>, RawQuery(query): RawQuery) -> Result<Json<Value>, ApiError> {
    let query: SeriesQuery = serde_urlencoded::from_str(query.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::invalid_request(format!("bad series query: {e}")))?;
    let until = query.until_ms.unwrap_or(gw.scheduler.now().0 + 1);
    let since = query.since_ms.unwrap_or(until.saturating_sub(3_600_000));
    if since >= until {
        return Err(ApiError::invalid_request("since_ms must come before until_ms").param("since_ms"));
    }
    if until > i64::MAX as u64 {
        return Err(ApiError::invalid_request("until_ms is past any time the logs can hold").param("until_ms"));
    }
    let buckets = query.buckets.unwrap_or(60).clamp(1, crate::state::MAX_BUCKETS);
    let state = gw.state.clone();
    let rows = tokio::task::spawn_blocking(move || state.log_series(since, until, buckets))
        .await
        .map_err(|e| internal(e.to_string()))?
        .map_err(|e| internal(e.to_string()))?;
    let bucket_ms = crate::state::Grid::new(since, until, buckets).width;
    Ok(Json(json!({"since_ms": since, "until_ms": until, "bucket_ms": bucket_ms, "buckets": rows})))
}

pub fn internal(message: String) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorType::Api, message)
}
