//! Adapters: list them, upload a `.wasm` component or a `.lua` script (checked — compiled or
//! loaded, instantiated, asked to describe itself — before it replaces anything; in use at
//! once, while streams already open finish on the adapter they started with), delete one.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{conflict, not_found};
use crate::config::AdapterName;
use crate::plugin::{Adapter, AdapterOrigin};
use crate::server::Gateway;
use crate::server::admin::internal;
use crate::server::error::ApiError;

/// Largest adapter upload.
pub const MAX_UPLOAD: usize = 64 << 20;

fn adapter_json(gw: &Gateway, adapter: &Adapter) -> Value {
    let pool = adapter.pool_stats();
    let m = adapter.metadata();
    let used_by: Vec<String> = gw
        .runtime()
        .config
        .sources
        .iter()
        .filter(|s| &s.adapter == adapter.name())
        .map(|s| s.name.to_string())
        .collect();
    let (origin, file) = match adapter.origin() {
        AdapterOrigin::Builtin => ("builtin", None),
        AdapterOrigin::File(path) => ("file", Some(path.display().to_string())),
    };
    json!({
        "name": adapter.name(), "version": m.version, "protocol": m.protocol, "origin": origin, "file": file,
        "lua": adapter.is_lua(), "native": adapter.native_protocols().collect::<Vec<_>>(),
        "pool": {"capacity": pool.capacity, "instances": pool.instances, "idle": pool.idle, "sessions": pool.sessions},
        "used_by": used_by,
    })
}

pub async fn list(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let adapters: Vec<Value> = gw.plugins.adapters().iter().map(|a| adapter_json(&gw, a)).collect();
    Json(json!({"adapters": adapters}))
}

pub(crate) fn checked_name(name: &str) -> Result<AdapterName, ApiError> {
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(AdapterName::new(name))
    } else {
        Err(ApiError::invalid_request(format!("`{name}` is not an adapter name: use letters, digits, - and _")))
    }
}

/// `?rename=true` on an upload: install a component under the path's name although it
/// describes itself by another.
#[derive(Debug, Default, serde::Deserialize)]
pub struct UploadOptions {
    #[serde(default)]
    rename: bool,
}

/// `PUT /admin/api/adapters/{name}` with the component's bytes as the body. A component that
/// describes itself by another name is refused (a renamed file, most often) unless `?rename=true`
/// says the path's name is meant; then the answer's `note` says which name sources use.
pub async fn upload(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    Query(options): Query<UploadOptions>,
    bytes: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let name = checked_name(&name)?;
    let naming = if options.rename { Naming::PathWins } else { Naming::MustAgree };
    let (adapter, replaced) = install(&gw, &name, &bytes, naming).await?;
    if let Some(shared) = &gw.shared {
        shared.publish_adapter(name.as_str(), bytes);
    }
    let status = if replaced { StatusCode::OK } else { StatusCode::CREATED };
    let mut answer = adapter_json(&gw, &adapter);
    let described = &adapter.metadata().name;
    if !adapter.is_lua() && described != name.as_str() {
        let note = format!(
            "the component describes itself as `{described}`; it is installed as `{name}`, the name in the path, which sources use"
        );
        tracing::warn!(adapter = %name, described = %crate::logsafe::Escaped(described), "{note}");
        answer["note"] = json!(note);
    }
    Ok((status, Json(answer)))
}

/// Whether an upload's name must agree with what its component's `describe()` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    MustAgree,
    /// The name in the path is meant (an operator's `?rename=true`, another replica's upload).
    PathWins,
}

/// Checks an uploaded adapter (a component or a Lua script), writes it to `adapter_dir` and
/// puts it in use; true when it replaced one. Shared by uploads and other replicas' uploads.
pub async fn install(
    gw: &Gateway,
    name: &AdapterName,
    bytes: &[u8],
    naming: Naming,
) -> Result<(Arc<Adapter>, bool), ApiError> {
    let dir = &gw.settings.adapter_dir;
    let refused = |what: &str| {
        ApiError::invalid_request(format!(
            "adapter `{name}` was not installed: the body is {what}; upload a WebAssembly component (`.wasm`) or a Lua script (`.lua`)"
        ))
        .code("invalid_adapter")
    };
    // What was uploaded is recognised before anything parses it, so the answer names it.
    let (file, checked) = match Upload::of(bytes) {
        Upload::Component => {
            let file = dir.join(format!("{name}.wasm"));
            let checked = gw.plugins.check(name, AdapterOrigin::File(file.clone()), bytes).await;
            (file, checked)
        }
        Upload::CoreModule => {
            return Err(refused(
                "a core WebAssembly module, not a component (build it as a component: `switchyard adapter new` sets that up; docs/adapters.md)",
            ));
        }
        Upload::Json => return Err(refused("JSON (a recorded case or a config, perhaps), not an adapter")),
        Upload::Binary => return Err(refused("neither a WebAssembly component nor UTF-8 text")),
        Upload::Lua(script) => {
            let file = dir.join(format!("{name}.lua"));
            let checked = gw.plugins.check_lua(name, AdapterOrigin::File(file.clone()), script).await;
            (file, checked)
        }
    };
    let adapter = checked.map_err(|e| {
        ApiError::invalid_request(format!("adapter `{name}` was not installed: {e}")).code("invalid_adapter")
    })?;
    let described = adapter.metadata().name.as_str();
    if naming == Naming::MustAgree && !adapter.is_lua() && described != name.as_str() {
        let shown = crate::logsafe::Escaped(described);
        return Err(ApiError::invalid_request(format!(
            "adapter `{name}` was not installed: the component describes itself as `{shown}`; upload it as `{shown}`, or add ?rename=true to install it as `{name}` (the name sources use)"
        ))
        .code("adapter_name_mismatch"));
    }
    crate::private_fs::create_dir(dir)
        .and_then(|()| {
            let tmp = file.with_extension(format!("tmp-{}", std::process::id()));
            crate::private_fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &file)
        })
        .map_err(|e| internal(format!("cannot write {}: {e}", file.display())))?;
    let replaced = gw.plugins.adapter(name).is_some();
    gw.plugins.put(adapter.clone());
    gw.plugins.size_pools(&gw.runtime().config);
    tracing::info!(adapter = %name, replaced, bytes = bytes.len(), "installed an adapter");
    crate::server::audit::note(format!(
        "adapter {name}: {} bytes, sha256 {}",
        bytes.len(),
        crate::shared::hex_sha256(bytes)
    ));
    Ok((adapter, replaced))
}

/// What an upload is, by its first bytes: a component (the wasm magic, the component layer),
/// a core module (the wasm magic, version 1), JSON, other UTF-8 text (a Lua script) or binary.
#[derive(Debug, PartialEq, Eq)]
enum Upload<'a> {
    Component,
    CoreModule,
    Json,
    Lua(&'a str),
    Binary,
}

impl<'a> Upload<'a> {
    fn of(bytes: &'a [u8]) -> Upload<'a> {
        if let Some(version) = bytes.strip_prefix(b"\0asm") {
            return if version.starts_with(&[1, 0, 0, 0]) { Upload::CoreModule } else { Upload::Component };
        }
        let Ok(text) = std::str::from_utf8(bytes) else { return Upload::Binary };
        let trimmed = text.trim_start();
        if (trimmed.starts_with('{') || trimmed.starts_with('['))
            && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
        {
            return Upload::Json;
        }
        Upload::Lua(text)
    }
}

/// `GET /admin/api/adapters/{name}/source`: a Lua adapter's script, as text.
pub async fn source(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<Response, ApiError> {
    let name = checked_name(&name)?;
    let adapter = gw.plugins.adapter(&name).ok_or_else(|| not_found("adapter", name.as_str()))?;
    let script = adapter.script().ok_or_else(|| {
        ApiError::invalid_request(format!(
            "`{name}` is a WebAssembly component, not a Lua script: it has no source here"
        ))
    })?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], script.to_string()).into_response())
}

/// `DELETE /admin/api/adapters/{name}`: an uploaded adapter; a built-in it overrode comes back.
pub async fn delete(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let name = checked_name(&name)?;
    remove(&gw, &name)?;
    if let Some(shared) = &gw.shared {
        shared.publish_adapter_removed(name.as_str());
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes an uploaded adapter unless a source still uses it (a built-in it overrode comes back).
pub fn remove(gw: &Gateway, name: &AdapterName) -> Result<(), ApiError> {
    let adapter = gw.plugins.adapter(name).ok_or_else(|| not_found("adapter", name.as_str()))?;
    let AdapterOrigin::File(file) = adapter.origin().clone() else {
        return Err(ApiError::invalid_request(format!("`{name}` is built in; only uploaded adapters can be deleted")));
    };
    let builtin = crate::plugin::BUILTIN_ADAPTERS.iter().any(|(n, _)| *n == name.as_str());
    let users: Vec<String> =
        gw.runtime().config.sources.iter().filter(|s| s.adapter == *name).map(|s| s.name.to_string()).collect();
    if !builtin && !users.is_empty() {
        return Err(conflict(format!("adapter `{name}` is used by {}: change their adapter first", users.join(", "))));
    }
    std::fs::remove_file(&file)
        .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
        .map_err(|e| internal(format!("cannot delete {}: {e}", file.display())))?;
    gw.plugins.remove(name);
    gw.plugins.size_pools(&gw.runtime().config);
    tracing::info!(adapter = %name, "deleted an adapter");
    crate::server::audit::note(format!("adapter {name} deleted"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_is_recognised_before_it_is_parsed() {
        assert_eq!(Upload::of(b"\0asm\x0d\0\x01\0rest"), Upload::Component);
        assert_eq!(Upload::of(b"\0asm\x01\0\0\0rest"), Upload::CoreModule);
        assert_eq!(Upload::of(b"  {\"request\": {}}"), Upload::Json);
        assert_eq!(Upload::of(b"[1, 2]"), Upload::Json);
        assert_eq!(Upload::of(b"return { name = 'x' }"), Upload::Lua("return { name = 'x' }"));
        assert_eq!(Upload::of(b"{ broken lua table"), Upload::Lua("{ broken lua table"));
        assert_eq!(Upload::of(&[0xff, 0xfe, 0]), Upload::Binary);
    }
}
