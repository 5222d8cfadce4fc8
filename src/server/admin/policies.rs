//! Policies in the admin API: list them; define one at run time (a built-in or a component
//! with its settings), upload a component (checked — compiled, described — before anything
//! changes; kept in `data_dir/policies`), delete a runtime one. Kept in the runtime file.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{body, conflict, internal, not_found};
use crate::config::{OnError, PolicyConfig, PolicyName};
use crate::server::Gateway;
use crate::server::error::ApiError;
use crate::server::policy;

/// How an uploaded policy component travels to the other replicas: with the adapters, under a
/// name no adapter can have (an adapter's has no `.`).
pub const REPLICATED: &str = "policy.";

/// A policy component another replica's operator uploaded: checked as an upload is, kept in
/// this replica's `data_dir/policies`; the runtime file that names it is adopted after.
pub async fn install_replicated(gw: &Gateway, name: &str, bytes: &[u8]) -> Result<(), String> {
    let name = checked_name(name).map_err(|e| e.message.to_string())?;
    let sandbox = gw.settings.sandbox.limits(gw.settings.body_limit_bytes);
    gw.plugins.load_policy(name.as_str(), bytes, sandbox).await?;
    let file = crate::config::uploaded_file(&gw.settings.data_dir, name.as_str());
    let dir = file.parent().expect("in data_dir/policies");
    crate::private_fs::create_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    crate::private_fs::write(&file, bytes).map_err(|e| format!("cannot write {}: {e}", file.display()))
}

/// Largest policy component upload (componentize-py's carry CPython: about 20 MB).
pub const MAX_UPLOAD: usize = 64 << 20;

/// `GET /admin/api/policies`: every policy in use (config.yaml's and the runtime file's).
pub async fn list(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let runtime = gw.runtime();
    let mut listed = runtime.policies.describe();
    for entry in &mut listed {
        let runtime_defined = runtime.file.policies.iter().any(|p| p.name.as_str() == entry["name"]);
        entry["origin"] = json!(if runtime_defined { "runtime" } else { "config" });
    }
    Json(json!({"policies": listed}))
}

fn checked_name(name: &str) -> Result<PolicyName, ApiError> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(PolicyName::new(name))
    } else {
        Err(ApiError::invalid_request(format!("`{name}` is not a policy name: use letters, digits, - and _")))
    }
}

/// A policy as `PUT /admin/api/policies/{name}` takes it: all but its name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Definition {
    plugin: String,
    #[serde(default)]
    settings: BTreeMap<String, String>,
    #[serde(default)]
    on_error: OnError,
    #[serde(default)]
    global: bool,
    cpu_ms: Option<u64>,
    wall_ms: Option<u64>,
    memory_mb: Option<u32>,
}

/// `PUT /admin/api/policies/{name}`: defines (or replaces) a policy at run time. A component
/// it did not run before is loaded first; a failure to load changes nothing.
pub async fn define(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let name = checked_name(&name)?;
    let d: Definition = body(&bytes)?;
    let config = PolicyConfig {
        name: name.clone(),
        plugin: d.plugin,
        settings: d.settings,
        on_error: d.on_error,
        global: d.global,
        cpu_ms: d.cpu_ms,
        wall_ms: d.wall_ms,
        memory_mb: d.memory_mb,
    };
    let kept = gw.runtime().config.policies.iter().any(|p| p.name == name && policy::same_component(p, &config));
    if !kept {
        stage(&gw, &config).await?;
    }
    put(&gw, config).await?;
    Ok(Json(shown(&gw, &name)))
}

/// `?global=&on_error=` on an upload of a policy not defined yet.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadOptions {
    global: Option<bool>,
    on_error: Option<OnError>,
}

/// `PUT /admin/api/policies/{name}/component` with a component's bytes: checked, kept in
/// `data_dir/policies/NAME.wasm`, and in use at once by policy `name` (defined with it if new,
/// its settings kept if not).
pub async fn upload(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    Query(options): Query<UploadOptions>,
    bytes: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let name = checked_name(&name)?;
    if !bytes.starts_with(b"\0asm") {
        return Err(ApiError::invalid_request(format!(
            "policy `{name}` was not installed: the body is not a WebAssembly component; upload the `.wasm` a policy project builds (docs/policies.md)"
        ))
        .code("invalid_policy"));
    }
    let file = crate::config::uploaded_file(&gw.settings.data_dir, name.as_str());
    let dir = file.parent().expect("in data_dir/policies").to_path_buf();
    let existing = gw.runtime().config.policies.iter().find(|p| p.name == name).cloned();
    let created = existing.is_none();
    let config = PolicyConfig {
        plugin: format!("{}{name}", crate::config::UPLOADED),
        global: options.global.unwrap_or(existing.as_ref().is_some_and(|p| p.global)),
        on_error: options.on_error.unwrap_or(existing.as_ref().map_or(OnError::Closed, |p| p.on_error)),
        ..existing.unwrap_or_else(|| PolicyConfig {
            name: name.clone(),
            plugin: String::new(),
            settings: BTreeMap::new(),
            on_error: OnError::Closed,
            global: false,
            cpu_ms: None,
            wall_ms: None,
            memory_mb: None,
        })
    };
    // Checked before anything is written: a component that does not load changes nothing.
    let limits = policy::limits_for(&config, &gw.settings.sandbox.limits(gw.settings.body_limit_bytes));
    let plugin = gw.plugins.load_policy(name.as_str(), &bytes, limits).await.map_err(|e| {
        ApiError::invalid_request(format!("policy `{name}` was not installed: {e}")).code("invalid_policy")
    })?;
    crate::private_fs::create_dir(&dir).map_err(|e| internal(format!("cannot create {}: {e}", dir.display())))?;
    crate::private_fs::write(&file, &bytes).map_err(|e| internal(format!("cannot write {}: {e}", file.display())))?;
    gw.stage_policy(name.clone(), Arc::new(plugin));
    put(&gw, config).await?;
    // The other replicas keep it in their own data_dir (their runtime file names it by name).
    if let Some(shared) = &gw.shared {
        shared.publish_adapter(&format!("{REPLICATED}{name}"), bytes.clone());
    }
    tracing::info!(policy = %name, bytes = bytes.len(), "admin uploaded a policy component");
    crate::server::audit::note(format!(
        "policy component {name}: {} bytes, sha256 {}",
        bytes.len(),
        crate::shared::hex_sha256(&bytes)
    ));
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(shown(&gw, &name))))
}

/// `DELETE /admin/api/policies/{name}`: a runtime policy goes (config.yaml's comes back if it
/// had one); refused while a key, route or source names it.
pub async fn delete(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let name = checked_name(&name)?;
    let runtime = gw.runtime();
    if !runtime.file.policies.iter().any(|p| p.name == name) {
        return Err(match runtime.config.policies.iter().any(|p| p.name == name) {
            true => conflict(format!("policy `{name}` is config.yaml's: remove it there")),
            false => not_found("policy", name.as_str()),
        });
    }
    // config.yaml's definition of the name, if any, runs again: its component is loaded first.
    if let Some(base) = gw.settings.policies.iter().find(|p| p.name == name) {
        stage(&gw, base).await?;
    }
    gw.edit(|file, _| {
        file.policies.retain(|p| p.name != name);
        Ok(())
    })
    .await?;
    if let Some(shared) = &gw.shared {
        shared.publish_adapter_removed(&format!("{REPLICATED}{name}"));
    }
    let file = crate::config::uploaded_file(&gw.settings.data_dir, name.as_str());
    if let Err(e) = std::fs::remove_file(&file)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(file = %file.display(), "a deleted policy's component was not removed: {e}");
    }
    tracing::info!(policy = %name, "admin deleted a policy");
    Ok(StatusCode::NO_CONTENT)
}

/// Loads `config`'s component for the change about to name it.
async fn stage(gw: &Gateway, config: &PolicyConfig) -> Result<(), ApiError> {
    let sandbox = gw.settings.sandbox.limits(gw.settings.body_limit_bytes);
    let plugin = policy::load_component(&gw.plugins, config, &sandbox, &gw.settings.data_dir).await.map_err(|e| {
        ApiError::invalid_request(format!("the change was not made: policy {e}")).code("invalid_policy")
    })?;
    gw.stage_policy(config.name.clone(), plugin);
    Ok(())
}

/// Puts `config` in the runtime file in place of any policy of its name.
async fn put(gw: &Gateway, config: PolicyConfig) -> Result<(), ApiError> {
    gw.edit(|file, _| {
        file.policies.retain(|p| p.name != config.name);
        file.policies.push(config);
        Ok(())
    })
    .await
}

fn shown(gw: &Gateway, name: &PolicyName) -> Value {
    gw.runtime().policies.describe().into_iter().find(|p| p["name"] == name.as_str()).unwrap_or(Value::Null)
}
