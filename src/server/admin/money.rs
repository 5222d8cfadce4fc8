//! Money in the admin API: what each source's model costs (and where the price came from),
//! prices set at run time, the models serving traffic without a price, spend grouped by key,
//! source, model or day, and where every budget stands.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::keys::budget_json;
use super::{body, internal, not_found};
use crate::config::{PriceOverride, SourceName};
use crate::domain::{Account, Price, Usd};
use crate::server::Gateway;
use crate::server::error::ApiError;
use crate::state::SpendBy;

/// How far back "serving traffic" and spend look by default: 30 days.
const DEFAULT_SPAN_MS: u64 = 30 * 86_400_000;

fn price_json(price: &Price) -> Value {
    json!({
        "input": price.rates.input, "cached_input": price.rates.cached_input,
        "cache_write": price.rates.cache_write, "output": price.rates.output,
        "tiers": price.tiers,
        "images": price.images.iter().map(|(v, p)| (v.clone(), json!(p))).collect::<serde_json::Map<_, _>>(),
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::state::StateError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| internal(e.to_string()))?.map_err(|e| internal(e.to_string()))
}

/// `GET /admin/api/prices`: every configured (and detected) model's price and its origin,
/// the ones without a price, and the unpriced ones that served in the last 30 days.
pub async fn list(State(gw): State<Arc<Gateway>>) -> Result<Json<Value>, ApiError> {
    let runtime = gw.runtime();
    let mut models = Vec::new();
    let mut unpriced = Vec::new();
    for source in &runtime.config.sources {
        for model in &source.models {
            match runtime.prices.price(source, model) {
                Some(priced) => models.push(json!({
                    "source": source.name, "model": model.name, "upstream": model.upstream_name(),
                    "kind": model.kind, "detected": model.detected,
                    "price": price_json(&priced.price), "origin": priced.origin,
                })),
                None => unpriced
                    .push(json!({"source": source.name, "model": model.name, "upstream": model.upstream_name()})),
            }
        }
    }
    let since = gw.scheduler.now().0.saturating_sub(DEFAULT_SPAN_MS);
    let state = gw.state.clone();
    let serving = blocking(move || state.unpriced(since)).await?;
    let table = runtime.prices.table();
    Ok(Json(json!({
        "costs": gw.settings.pricing.costs,
        "table": {"updated": table.updated, "models": table.len(), "file": gw.settings.pricing.table},
        "models": models,
        "unpriced": unpriced,
        "unpriced_serving": serving.into_iter().map(|(source, model, attempts, last)| json!({
            "source": source, "model": model, "attempts": attempts, "last_at_ms": last,
        })).collect::<Vec<_>>(),
        "overrides": runtime.config.prices,
    })))
}

/// `PUT /admin/api/prices` with a price (`{"source"?, "model", "input", "output", ...}`): set
/// at run time, replacing one for the same source and model.
pub async fn set(State(gw): State<Arc<Gateway>>, bytes: Bytes) -> Result<Json<Value>, ApiError> {
    let price: PriceOverride = body(&bytes)?;
    if price.is_incomplete() {
        return Err(ApiError::invalid_request(
            "a price needs both input and output (USD per 1M tokens; \"0\" for free), or image (USD per image)",
        )
        .param(if price.input.is_none() { "input" } else { "output" }));
    }
    let (source, model) = (price.source.clone(), price.model.clone());
    gw.edit(|file, _| {
        file.prices.retain(|p| !(p.source == price.source && p.model == price.model));
        file.prices.push(price);
        Ok(())
    })
    .await?;
    tracing::info!(source = ?source.as_ref().map(SourceName::as_str), model = %crate::logsafe::Escaped(&model), "admin set a price");
    list(State(gw)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Which {
    model: String,
    source: Option<SourceName>,
}

/// `DELETE /admin/api/prices?model=M[&source=S]`: a run-time price removed (config.yaml's
/// or the table's applies again).
pub async fn delete(State(gw): State<Arc<Gateway>>, RawQuery(query): RawQuery) -> Result<StatusCode, ApiError> {
    let which: Which = serde_urlencoded::from_str(query.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::invalid_request(format!("name the price: ?model=M[&source=S] ({e})")))?;
    gw.edit(|file, _| {
        let before = file.prices.len();
        file.prices.retain(|p| !(p.source == which.source && p.model == which.model));
        if file.prices.len() == before {
            return Err(not_found("run-time price for model", &which.model));
        }
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpendQuery {
    by: Option<SpendBy>,
    since_ms: Option<u64>,
    until_ms: Option<u64>,
}

/// `GET /admin/api/spend?by=key|source|model|day[&since_ms&until_ms]`: spend per group in
/// the range (the last 30 days by default), dearest first, with the total.
pub async fn spend(State(gw): State<Arc<Gateway>>, RawQuery(query): RawQuery) -> Result<Json<Value>, ApiError> {
    let q: SpendQuery = serde_urlencoded::from_str(query.as_deref().unwrap_or_default()).map_err(|e| {
        ApiError::invalid_request(format!("bad spend query (by=key|source|model|day, since_ms, until_ms): {e}"))
    })?;
    let now = gw.scheduler.now().0;
    let until = q.until_ms.unwrap_or(now.saturating_add(1));
    let since = q.since_ms.unwrap_or(until.saturating_sub(DEFAULT_SPAN_MS));
    let by = q.by.unwrap_or(SpendBy::Key);
    let state = gw.state.clone();
    let rows = blocking(move || state.spend(by, since, until)).await?;
    let total = rows.iter().fold(Usd::ZERO, |sum, r| sum.saturating_add(r.cost_usd));
    let unpriced: u64 = rows.iter().map(|r| r.unpriced).sum();
    Ok(Json(
        json!({"by": by_name(by), "since_ms": since, "until_ms": until, "total_usd": total, "unpriced": unpriced, "rows": rows}),
    ))
}

fn by_name(by: SpendBy) -> &'static str {
    match by {
        SpendBy::Key => "key",
        SpendBy::Source => "source",
        SpendBy::Model => "model",
        SpendBy::Day => "day",
    }
}

/// `GET /admin/api/budgets`: every key's and group's budget and where it stands now.
pub async fn budgets(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let runtime = gw.runtime();
    let config = &runtime.config;
    let keys = config.keys.iter().cloned().chain(config.runtime_keys.iter().map(|k| k.as_key_config()));
    let keys: Vec<Value> = keys
        .filter_map(|k| {
            let budget = k.budget?;
            let mut view = budget_json(&gw, &Account::KeyUsd(k.name.clone()), &budget);
            view["key"] = json!(k.name);
            view["group"] = json!(k.group);
            Some(view)
        })
        .collect();
    let groups: Vec<Value> = config
        .budgets
        .iter()
        .map(|b| {
            let mut view = budget_json(&gw, &Account::GroupUsd(b.group.clone()), &b.budget());
            view["group"] = json!(b.group);
            view
        })
        .collect();
    Json(json!({"costs": gw.settings.pricing.costs, "keys": keys, "groups": groups}))
}
