//! The policies in the admin API: each loaded policy with its component, hooks, hold-back,
//! whether it is global, and what its failure means.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::server::Gateway;

/// `GET /admin/api/policies`: the policies `policies:` defines, as loaded.
pub async fn list(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    Json(json!({"policies": gw.policies.describe()}))
}
