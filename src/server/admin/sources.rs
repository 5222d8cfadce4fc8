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
use std::time::Instant;

use crate::config::{ModelKind, RuntimeFile, Secret, SourceConfig, SourceName, SourceTemplate};
use crate::plugin::Operation;
use crate::provider::Target;
use crate::server::Gateway;
use crate::server::admin::internal;
use crate::server::error::{ApiError, ErrorType};

/// A source as answers show it: its key masked, where it comes from, and the models its
/// upstream listed (`detected_models`) apart from the configured ones, so a GET can be PUT back.
pub fn source_json(source: &SourceConfig, origin: &str) -> Value {
    let mut value = serde_json::to_value(source).expect("sources serialize");
    value["api_key"] = json!(source.api_key.masked());
    value["origin"] = json!(origin);
    value["enabled"] = json!(source.enabled);
    let (detected, configured): (Vec<_>, Vec<_>) = source.models.iter().partition(|m| m.detected);
    value["models"] = serde_json::to_value(configured).expect("models serialize");
    value["detected_models"] = json!(detected.iter().map(|m| &m.name).collect::<Vec<_>>());
    value
}

/// `POST /admin/api/sources/{name}/detect`: asks the upstream's model list now (the source's
/// `detect_models` need not be set); 502 with why when it fails, the configured models kept.
pub async fn detect(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    let name = SourceName::new(name);
    if !gw.runtime().config.sources.iter().any(|s| s.name == name) {
        return Err(not_found("source", name.as_str()));
    }
    match gw.detect(&name).await {
        Ok(models) => Ok(Json(json!({"source": name, "detected_models": models}))),
        Err(why) => {
            Err(ApiError::new(StatusCode::BAD_GATEWAY, ErrorType::Upstream, format!("model detection failed: {why}"))
                .code("detection_failed"))
        }
    }
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

async fn add(gw: &Gateway, mut source: SourceConfig) -> Result<(StatusCode, Json<Value>), ApiError> {
    let name = source.name.clone();
    gw.edit(|file, config| {
        if config.source(&name).is_some() {
            return Err(conflict(format!("a source named `{name}` exists; PUT /admin/api/sources/{name} changes it")));
        }
        // A deleted config.yaml source brought back without a key gets its config key again.
        if source.api_key.is_empty()
            && file.deleted_sources.contains(&name)
            && let Some(base) = gw.base.sources.iter().find(|s| s.name == name)
        {
            source.api_key = base.api_key.clone();
        }
        file.deleted_sources.retain(|n| n != &name);
        file.sources.push(source);
        Ok(())
    })
    .await?;
    tracing::info!(source = %name, "admin added a source");
    detect_if_asked(gw, &name).await;
    show_created(gw, &name)
}

/// A source that says `detect_models` gets its upstream's list when it is added or changed
/// (the answer shows it); a failure is logged and leaves the configured models.
async fn detect_if_asked(gw: &Gateway, name: &SourceName) {
    if gw.runtime().config.source(name).is_some_and(|s| s.detect_models) {
        let _ = gw.detect(name).await;
    }
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
    let mut value: serde_json::Map<String, Value> = body(&bytes)?;
    value.entry("name").or_insert_with(|| json!(name));
    // What GET answers can be sent back as it is: its read-only fields go, and its masked
    // key (or none, or an empty one) keeps the key.
    value.remove("origin");
    value.remove("deleted");
    value.remove("detected_models");
    let masked = gw.runtime().config.source(&name).map(|s| s.api_key.masked());
    let sent_key = value.get("api_key").and_then(Value::as_str).map(str::to_string);
    let keep_key = sent_key.is_none_or(|k| k.is_empty() || Some(&k) == masked.as_ref());
    if keep_key {
        value.remove("api_key");
    }
    let mut source: SourceConfig = body(Value::Object(value).to_string().as_bytes())?;
    let was_detecting = gw.runtime().config.source(&name).is_some_and(|s| s.detect_models);
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
    if !was_detecting {
        detect_if_asked(&gw, &name).await;
    }
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

/// `POST /admin/api/sources/{name}/enable`: the source serves again. An operator's switch:
/// only `enabled` changes, whatever else the source holds.
pub async fn enable(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    switch(gw, SourceName::new(name), true).await
}

/// `POST /admin/api/sources/{name}/disable`: no requests go to the source until it is enabled.
pub async fn disable(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    switch(gw, SourceName::new(name), false).await
}

async fn switch(gw: Arc<Gateway>, name: SourceName, enabled: bool) -> Result<Json<Value>, ApiError> {
    gw.edit(|file, config| {
        let mut source = config.source(&name).ok_or_else(|| not_found("source", name.as_str()))?.clone();
        if source.enabled == enabled {
            return Ok(());
        }
        source.enabled = enabled;
        file.sources.retain(|s| s.name != name);
        file.sources.push(source);
        Ok(())
    })
    .await?;
    tracing::info!(source = %name, enabled, "admin switched a source");
    show(State(gw), Path(name.to_string())).await
}

pub async fn replace_template(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let mut value: serde_json::Map<String, Value> = body(&bytes)?;
    value.insert("name".into(), json!(name));
    let template: SourceTemplate = body(Value::Object(value).to_string().as_bytes())?;
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

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestRequest {
    model: Option<String>,
}

/// What a source test asks: a few tokens, so a test costs next to nothing.
const TEST_PROMPT: &str = "Reply with the single word OK.";

/// `POST /admin/api/sources/{name}/test` with `{}` or `{"model"}`: one real chat request to
/// this source (its first chat model by default), past the scheduler: it waits for a place
/// under `max_concurrent` like any request but cools, scores and logs nothing. Answers 200
/// with `ok`, the latency and the answer or the error.
pub async fn test(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let request: TestRequest = if bytes.is_empty() { TestRequest::default() } else { body(&bytes)? };
    let runtime = gw.runtime();
    let source = runtime.config.source(&SourceName::new(name.clone())).ok_or_else(|| not_found("source", &name))?;
    let model = match &request.model {
        Some(m) => source.model(m).ok_or_else(|| {
            ApiError::invalid_request(format!("source `{name}` does not serve model `{m}`")).param("model")
        })?,
        None => source.models.iter().find(|m| m.kind == ModelKind::Chat).ok_or_else(|| {
            ApiError::invalid_request(format!("source `{name}` has no chat model to test: name one in `model`"))
        })?,
    };
    if model.kind != ModelKind::Chat {
        return Err(ApiError::invalid_request(format!("model `{}` is not a chat model", model.name)).param("model"));
    }
    let adapter = gw
        .plugins
        .adapter(&source.adapter)
        .ok_or_else(|| internal(format!("adapter `{}` is not loaded", source.adapter)))?;
    let unified = json!({
        "model": model.name, "max_tokens": 16, "stream": false,
        "messages": [{"role": "user", "content": TEST_PROMPT}],
    })
    .to_string();
    let target = Target { source, model, adapter: &adapter, operation: Operation::Chat, native: None };
    let started = Instant::now();
    if let Some(rpm) = source.rpm
        && gw.scheduler.take_rpm(&source.name, rpm).is_err()
    {
        return Ok(Json(json!({
            "ok": false, "source": source.name, "model": model.name, "status": 429,
            "latency_ms": 0, "first_byte_ms": null, "answer": null,
            "error": {"message": format!("rpm limit reached ({rpm} requests per minute)"), "code": "rpm_limit"},
        })));
    }
    let Some(_permit) = runtime.provider.admit(source).await else {
        return Ok(Json(json!({
            "ok": false, "source": source.name, "model": model.name, "status": 503,
            "latency_ms": started.elapsed().as_millis() as u64, "first_byte_ms": null, "answer": null,
            "error": {"message": format!("busy: all {} places of max_concurrent are in use", source.max_concurrent), "code": "busy"},
        })));
    };
    let outcome = runtime.provider.complete(&target, &unified).await;
    let latency_ms = started.elapsed().as_millis() as u64;
    tracing::info!(source = %source.name, model = %model.name, ok = outcome.is_ok(), latency_ms, "admin tested a source");
    Ok(Json(match outcome {
        Ok((body, head)) => {
            let text = switchyard_unified::Reply::parse(body.unified()).unwrap_or_default().text();
            json!({
                "ok": true, "source": source.name, "model": model.name, "status": 200, "latency_ms": latency_ms,
                "first_byte_ms": head.as_millis() as u64, "answer": text.chars().take(500).collect::<String>(),
                "error": null,
            })
        }
        Err(e) => {
            let api = ApiError::from(&e);
            json!({
                "ok": false, "source": source.name, "model": model.name, "status": api.status.as_u16(),
                "latency_ms": latency_ms, "first_byte_ms": null, "answer": null,
                "error": {"message": e.to_string(), "code": api.code},
            })
        }
    }))
}
