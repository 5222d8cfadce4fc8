//! `GET /v1/models` (what this key may use, in OpenAI's list format) and `GET /health`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::Gateway;
use super::error::ApiError;

pub async fn list_models(State(gw): State<Arc<Gateway>>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    let runtime = gw.runtime();
    let key = runtime.keys.authenticate(&headers)?;
    let mut seen = BTreeSet::new();
    let mut data = Vec::new();
    // A disabled source serves nothing, so its models are not offered (unless another serves them).
    for source in runtime.config.sources.iter().filter(|s| s.enabled) {
        for model in &source.models {
            let qualified = format!("{}/{}", source.name, model.name);
            // A detected model another source serves is offered by its qualified name only.
            let id = if model.qualified_only { &qualified } else { &model.name };
            if key.scope.allows(&[&model.name, &qualified]) && seen.insert(id.clone()) {
                let mut entry = json!({"id": id, "object": "model", "created": 0, "owned_by": source.name});
                if model.detected {
                    entry["detected"] = json!(true);
                }
                data.push(entry);
            }
        }
    }
    Ok(Json(json!({"object": "list", "data": data})))
}

pub async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}
