//! Sources (config.yaml's and runtime ones) and source templates. Deleting a base source
//! leaves a tombstone in the runtime file; adding one of that name brings it back. API keys
//! are masked in every answer; a replace without `api_key` keeps the key the source had.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{body, conflict, not_found};
use crate::config::{RuntimeFile, Secret, SourceConfig, SourceName, SourceTemplate};
use crate::server::Gateway;
use crate::server::error::ApiError;

/// A source as answers show it: its key masked, and where it comes from.
pub fn source_json(source: &SourceConfig, origin: &str) -> Value {
    let mut value = serde_json::to_value(source).expect("sources serialize");
    value["api_key"] = json!(source.api_key.masked());
    value["origin"] = json!(origin);
    value
}

fn origin(gw: &Gateway, file: &RuntimeFile, name: &SourceName) -> &'static str {
    match (gw.base.sources.iter().any(|s| &s.name == name), file.sources.iter().any(|s| &s.name == name)) {
        (true, true) => "config, changed at run time",
        (true, false) => "config",
        _ => "runtime",
    }
}

/// `GET /admin/api/sources`: the sources in use, then base sources deleted at run time.
pub async fn list(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let runtime = gw.runtime();
    let mut out: Vec<Value> =
        runtime.config.sources.iter().map(|s| source_json(s, origin(&gw, &runtime.file, &s.name))).collect();
    for name in &runtime.file.deleted_sources {
        if let Some(s) = gw.base.sources.iter().find(|s| &s.name == name) {
            let mut deleted = source_json(s, "config");
            deleted["deleted"] = json!(true);
            out.push(deleted);
        }
    }
    Json(json!({"sources": out}))
}

pub async fn show(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    let runtime = gw.runtime();
    let name = SourceName::new(name);
    let source = runtime.config.source(&name).ok_or_else(|| not_found("source", name.as_str()))?;
    Ok(Json(source_json(source, origin(&gw, &runtime.file, &name))))
}

/// `POST /admin/api/sources` with a source as config.yaml writes one (JSON).
pub async fn create(State(gw): State<Arc<Gateway>>, bytes: Bytes) -> Result<(StatusCode, Json<Value>), ApiError> {
    let source: SourceConfig = body(&bytes)?;
    add(&gw, source).await
}

async fn add(gw: &Gateway, source: SourceConfig) -> Result<(StatusCode, Json<Value>), ApiError> {
    let name = source.name.clone();
    gw.edit(|file, config| {
        if config.source(&name).is_some() {
            return Err(conflict(format!("a source named `{name}` exists; PUT /admin/api/sources/{name} changes it")));
        }
        file.deleted_sources.retain(|n| n != &name);
        file.sources.push(source);
        Ok(())
    })
    .await?;
    tracing::info!(source = %name, "admin added a source");
    show_created(gw, &name)
}

fn show_created(gw: &Gateway, name: &SourceName) -> Result<(StatusCode, Json<Value>), ApiError> {
    let runtime = gw.runtime();
    let source = runtime.config.source(name).ok_or_else(|| not_found("source", name.as_str()))?;
    Ok((StatusCode::CREATED, Json(source_json(source, origin(gw, &runtime.file, name)))))
}

/// `PUT /admin/api/sources/{name}`: the whole source; without `api_key` it keeps its key.
pub async fn replace(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let name = SourceName::new(name);
    let mut value: Value = body(&bytes)?;
    if value.get("name").is_none() {
        value["name"] = json!(name);
    }
    let keep_key = value.get("api_key").is_none();
    let mut source: SourceConfig = body(value.to_string().as_bytes())?;
    if source.name != name {
        return Err(ApiError::invalid_request("a source cannot be renamed; create the new one and delete this one")
            .param("name"));
    }
    gw.edit(|file, config| {
        let current = config.source(&name).ok_or_else(|| not_found("source", name.as_str()))?;
        if keep_key {
            source.api_key = current.api_key.clone();
        }
        file.sources.retain(|s| s.name != name);
        file.sources.push(source);
        Ok(())
    })
    .await?;
    tracing::info!(source = %name, "admin changed a source");
    show(State(gw), Path(name.to_string())).await
}

/// `DELETE /admin/api/sources/{name}`: a runtime source goes; a base one gets a tombstone.
pub async fn delete(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let name = SourceName::new(name);
    let base = gw.base.sources.iter().any(|s| s.name == name);
    gw.edit(|file, config| {
        if config.source(&name).is_none() {
            return Err(not_found("source", name.as_str()));
        }
        file.sources.retain(|s| s.name != name);
        if base {
            file.deleted_sources.push(name.clone());
        }
        Ok(())
    })
    .await?;
    tracing::info!(source = %name, base, "admin deleted a source");
    Ok(StatusCode::NO_CONTENT)
}

pub async fn list_templates(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    Json(json!({"templates": gw.runtime().config.source_templates}))
}

fn check_template(template: &SourceTemplate) -> Result<(), ApiError> {
    for banned in ["name", "api_key"] {
        if template.fields.contains_key(banned) {
            return Err(ApiError::invalid_request(format!(
                "a template holds every source field but `name` and `api_key`; remove `{banned}`"
            ))
            .param(banned));
        }
    }
    template.instantiate(&SourceName::new("template-check"), &Secret::default()).map(|_| ()).map_err(|e| {
        ApiError::invalid_request(format!("template `{}` does not make a valid source: {e}", template.name))
    })
}

pub async fn create_template(
    State(gw): State<Arc<Gateway>>,
    bytes: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let template: SourceTemplate = body(&bytes)?;
    check_template(&template)?;
    let shown = json!(template);
    gw.edit(|file, _| {
        if file.source_templates.iter().any(|t| t.name == template.name) {
            return Err(conflict(format!("a template named `{}` exists", template.name)));
        }
        file.source_templates.push(template);
        Ok(())
    })
    .await?;
    Ok((StatusCode::CREATED, Json(shown)))
}

pub async fn replace_template(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let mut value: Value = body(&bytes)?;
    value["name"] = json!(name);
    let template: SourceTemplate = body(value.to_string().as_bytes())?;
    check_template(&template)?;
    let shown = json!(template);
    gw.edit(|file, _| {
        let slot =
            file.source_templates.iter_mut().find(|t| t.name == name).ok_or_else(|| not_found("template", &name))?;
        *slot = template;
        Ok(())
    })
    .await?;
    Ok(Json(shown))
}

pub async fn delete_template(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    gw.edit(|file, _| {
        let before = file.source_templates.len();
        file.source_templates.retain(|t| t.name != name);
        if file.source_templates.len() == before { Err(not_found("template", &name)) } else { Ok(()) }
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FromTemplate {
    name: SourceName,
    #[serde(default)]
    api_key: Secret,
}

/// `POST /admin/api/source-templates/{name}/sources` with `{name, api_key}`: a new source
/// with the template's fields (one more key to balance over).
pub async fn from_template(
    State(gw): State<Arc<Gateway>>,
    Path(template): Path<String>,
    bytes: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request: FromTemplate = body(&bytes)?;
    let runtime = gw.runtime();
    let template = runtime
        .config
        .source_templates
        .iter()
        .find(|t| t.name == template)
        .ok_or_else(|| not_found("template", &template))?;
    let source = template.instantiate(&request.name, &request.api_key).map_err(ApiError::invalid_request)?;
    add(&gw, source).await
}
