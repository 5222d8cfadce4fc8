//! Routes and their providers, by stable ids (derived from group and alias; a provider's from
//! its route, source and model). Changing a config.yaml route stores the changed route in the
//! runtime file; deleting one leaves a tombstone. Also Keyway's provider and health paths.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{body, conflict, not_found};
use crate::config::{Config, RouteConfig, RouteProvider, RuntimeFile, SourceName};
use crate::server::Gateway;
use crate::server::error::ApiError;

fn route_json(route: &RouteConfig) -> Value {
    let mut value = serde_json::to_value(route).expect("routes serialize");
    value["id"] = json!(route.id());
    for (p, shown) in route.providers.iter().zip(value["providers"].as_array_mut().into_iter().flatten()) {
        shown["id"] = json!(route.provider_id(p));
    }
    value
}

fn find<'a>(config: &'a Config, id: &str) -> Result<&'a RouteConfig, ApiError> {
    config.routes.iter().find(|r| r.id() == id).ok_or_else(|| not_found("route", id))
}

/// Stores `route` in the runtime file in place of the route with id `id` (config.yaml's or a
/// runtime one).
fn store(file: &mut RuntimeFile, id: &str, route: RouteConfig) {
    file.routes.retain(|r| r.id() != id);
    if route.id() != id {
        file.deleted_routes.push(id.to_string());
    }
    file.routes.push(route);
}

pub async fn list(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let routes: Vec<Value> = gw.runtime().config.routes.iter().map(route_json).collect();
    Json(json!({"routes": routes}))
}

pub async fn show(State(gw): State<Arc<Gateway>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(route_json(find(&gw.runtime().config, &id)?)))
}

pub async fn create(State(gw): State<Arc<Gateway>>, bytes: Bytes) -> Result<(StatusCode, Json<Value>), ApiError> {
    let route: RouteConfig = body(&bytes)?;
    let shown = route_json(&route);
    gw.edit(|file, config| {
        if config.routes.iter().any(|r| r.id() == route.id()) {
            return Err(conflict(format!("group `{}` has a route `{}` already", route.group, route.alias)));
        }
        file.deleted_routes.retain(|id| *id != route.id());
        file.routes.push(route);
        Ok(())
    })
    .await?;
    Ok((StatusCode::CREATED, Json(shown)))
}

pub async fn replace(
    State(gw): State<Arc<Gateway>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let route: RouteConfig = body(&bytes)?;
    let shown = route_json(&route);
    gw.edit(|file, config| {
        find(config, &id)?;
        store(file, &id, route);
        Ok(())
    })
    .await?;
    Ok(Json(shown))
}

pub async fn delete(State(gw): State<Arc<Gateway>>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let base = gw.base.routes.iter().any(|r| r.id() == id);
    gw.edit(|file, config| {
        find(config, &id)?;
        file.routes.retain(|r| r.id() != id);
        if base {
            file.deleted_routes.push(id.clone());
        }
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn providers(State(gw): State<Arc<Gateway>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let route = route_json(find(&gw.runtime().config, &id)?);
    Ok(Json(json!({"providers": route["providers"]})))
}

/// A route provider as Keyway's API writes it, or in Switchyard's words.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderBody {
    #[serde(alias = "provider_id")]
    source: Option<SourceName>,
    #[serde(alias = "upstream_model")]
    model: Option<String>,
    priority: Option<u32>,
    enabled: Option<bool>,
}

pub async fn add_provider(
    State(gw): State<Arc<Gateway>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request: ProviderBody = body(&bytes)?;
    let (Some(source), Some(model)) = (request.source, request.model) else {
        return Err(ApiError::invalid_request(
            "a provider needs `source` (or `provider_id`) and `model` (or `upstream_model`)",
        ));
    };
    let provider = RouteProvider {
        source,
        model,
        priority: request.priority.unwrap_or(0),
        enabled: request.enabled.unwrap_or(true),
    };
    let shown = gw
        .edit(|file, config| {
            let mut route = find(config, &id)?.clone();
            if route.providers.iter().any(|p| p.source == provider.source && p.model == provider.model) {
                return Err(conflict(format!(
                    "route `{}` has {}/{} already",
                    route.alias, provider.source, provider.model
                )));
            }
            route.providers.push(provider.clone());
            let mut shown = serde_json::to_value(&provider).expect("providers serialize");
            shown["id"] = json!(route.provider_id(&provider));
            store(file, &id, route);
            Ok(shown)
        })
        .await?;
    Ok((StatusCode::CREATED, Json(shown)))
}

/// The route holding provider `id`, and the provider's index in it.
fn find_provider(config: &Config, id: &str) -> Result<(RouteConfig, usize), ApiError> {
    for route in &config.routes {
        if let Some(i) = route.providers.iter().position(|p| route.provider_id(p) == id) {
            return Ok((route.clone(), i));
        }
    }
    Err(not_found("route provider", id))
}

/// `PATCH .../route-providers/{id}`: priority, enabled, model.
pub async fn update_provider(
    State(gw): State<Arc<Gateway>>,
    Path(id): Path<String>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let request: ProviderBody = body(&bytes)?;
    if request.source.is_some() {
        return Err(ApiError::invalid_request("a provider's source cannot change; add a new provider").param("source"));
    }
    let shown = gw
        .edit(|file, config| {
            let (mut route, i) = find_provider(config, &id)?;
            let p = &mut route.providers[i];
            if let Some(priority) = request.priority {
                p.priority = priority;
            }
            if let Some(enabled) = request.enabled {
                p.enabled = enabled;
            }
            if let Some(model) = request.model {
                p.model = model;
            }
            let p = &route.providers[i];
            let mut shown = serde_json::to_value(p).expect("providers serialize");
            shown["id"] = json!(route.provider_id(p));
            let route_id = route.id();
            store(file, &route_id, route);
            Ok(shown)
        })
        .await?;
    Ok(Json(shown))
}

pub async fn remove_provider(State(gw): State<Arc<Gateway>>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    gw.edit(|file, config| {
        let (mut route, i) = find_provider(config, &id)?;
        route.providers.remove(i);
        let route_id = route.id();
        store(file, &route_id, route);
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Keyway's `POST /admin/llm/health/{provider}/reset`: clears the source's cooldowns.
pub async fn reset_provider(
    State(gw): State<Arc<Gateway>>,
    Path(provider): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if gw.runtime().config.source(&SourceName::new(provider.clone())).is_none() {
        return Err(not_found("source", &provider));
    }
    let cleared = gw.scheduler.clear(Some(&provider), None);
    Ok(Json(json!({"cleared": cleared})))
}
