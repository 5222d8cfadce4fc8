//! Gateway keys: config.yaml's (scope changeable at run time) and keys created here, whose
//! generated secret is shown once and kept only as a digest. Usage against each key's quota
//! and budget.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{body, conflict, not_found};
use crate::config::{GroupName, KeyConfig, KeyName, RuntimeKey, mask};
use crate::domain::{Account, Budget, Usd};
use crate::scheduler::PeriodName;
use crate::server::Gateway;
use crate::server::auth::{digest_hex, id_of_digest_hex, id_of_secret};
use crate::server::error::ApiError;

fn key_json(gw: &Gateway, k: &KeyConfig, id: Option<&str>, origin: &str, shown_key: String) -> Value {
    let quota = k.quota();
    let tokens = Account::Tokens(k.name.clone());
    json!({
        "name": k.name, "origin": origin, "key": shown_key, "models": k.models, "group": k.group,
        "token_quota": k.token_quota, "period": k.period, "hours": k.hours, "cache": k.cache, "policies": k.policies,
        "used": quota.map(|q| gw.scheduler.key_used(&tokens, q.period)),
        "resets_at_ms": quota.and_then(|q| gw.scheduler.window_end(q.period)).map(|t| t.0),
        "budget": k.budget.map(|b| budget_json(gw, &Account::KeyUsd(k.name.clone()), &b)),
        "stored_response_bytes_today": id.map(|id| gw.stored_budget.used(gw, id)),
    })
}

/// A budget and where its account stands: spent in the current window (every replica's),
/// the share of the limit, when it starts over.
pub fn budget_json(gw: &Gateway, account: &Account, budget: &Budget) -> Value {
    let spent = gw.scheduler.key_used(account, budget.period);
    let limit = budget.limit();
    json!({
        "usd": budget.usd, "period": budget.period,
        "spent_usd": Usd::from_pico(spent.min(i64::MAX as u64) as i64),
        "percent": if limit == 0 { 100 } else { (spent as u128 * 100 / limit as u128).min(10_000) as u64 },
        "resets_at_ms": gw.scheduler.window_end(budget.period).map(|t| t.0),
    })
}

/// Every key in use: config.yaml's (secrets masked) and runtime ones (by their hint).
async fn all_keys(gw: &Arc<Gateway>) -> Vec<Value> {
    gw.stored_budget.load(gw).await;
    let runtime = gw.runtime();
    let mut out: Vec<Value> = runtime
        .config
        .keys
        .iter()
        .map(|k| key_json(gw, k, Some(&id_of_secret(k.key.expose())), "config", k.key.masked()))
        .collect();
    out.extend(runtime.config.runtime_keys.iter().map(|k| {
        let id = id_of_digest_hex(&k.key_sha256);
        key_json(gw, &k.as_key_config(), id.as_deref(), "runtime", k.hint.clone())
    }));
    out
}

pub async fn list(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    Json(json!({"keys": all_keys(&gw).await}))
}

pub async fn show(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    all_keys(&gw).await.into_iter().find(|k| k["name"] == name).map(Json).ok_or_else(|| not_found("key", &name))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewKey {
    name: KeyName,
    #[serde(default = "everything")]
    models: Vec<String>,
    #[serde(default)]
    group: GroupName,
    token_quota: Option<u64>,
    #[serde(default)]
    period: PeriodName,
    hours: Option<u32>,
    budget: Option<Budget>,
    cache: Option<bool>,
    #[serde(default)]
    policies: Vec<crate::config::PolicyName>,
}

fn everything() -> Vec<String> {
    vec!["*".into()]
}

/// `POST /admin/api/keys`: a new key; the answer carries its secret, the only time it is shown.
pub async fn create(State(gw): State<Arc<Gateway>>, bytes: Bytes) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request: NewKey = body(&bytes)?;
    if request.name.as_str().is_empty() {
        return Err(ApiError::invalid_request("a key needs a name").param("name"));
    }
    if request.models.is_empty() {
        return Err(ApiError::invalid_request("`models` is empty, so the key could use nothing").param("models"));
    }
    let (secret, key) = runtime_key(&gw, request);
    let name = key.name.clone();
    gw.edit(|file, config| {
        if config.keys.iter().any(|k| k.name == name) || config.runtime_keys.iter().any(|k| k.name == name) {
            return Err(conflict(format!("a key named `{name}` exists")));
        }
        file.keys.push(key);
        Ok(())
    })
    .await?;
    tracing::info!(key = %name, "admin created a key");
    made(gw, name, secret).await
}

/// The WebUI playground's key.
const PLAYGROUND: &str = "playground";
/// Tokens an hour the playground key may use.
const PLAYGROUND_TOKENS: u64 = 20_000;

/// `POST /admin/api/playground-key`: the playground's key made anew (its old secret stops
/// working), for every model with a small hourly quota, so operators try models without being
/// able to make keys: clicks never pile up unlimited keys.
pub async fn playground(State(gw): State<Arc<Gateway>>) -> Result<(StatusCode, Json<Value>), ApiError> {
    let request = NewKey {
        name: KeyName::new(PLAYGROUND),
        models: everything(),
        group: GroupName::default(),
        token_quota: Some(PLAYGROUND_TOKENS),
        period: PeriodName::Hour,
        hours: None,
        budget: None,
        cache: None,
        policies: Vec::new(),
    };
    let (secret, key) = runtime_key(&gw, request);
    let name = key.name.clone();
    gw.edit(|file, config| {
        if config.keys.iter().any(|k| k.name == name) {
            return Err(conflict(format!("config.yaml has a key named `{name}`: paste a key instead")));
        }
        file.keys.retain(|k| k.name != name);
        file.keys.push(key);
        Ok(())
    })
    .await?;
    made(gw, name, secret).await
}

/// A runtime key as asked, with a new secret (kept only as its digest).
fn runtime_key(gw: &Gateway, request: NewKey) -> (String, RuntimeKey) {
    let secret = format!("sk-sy-{}{}", uuid::Uuid::new_v4().simple(), &uuid::Uuid::new_v4().simple().to_string()[..16]);
    let key = RuntimeKey {
        name: request.name,
        key_sha256: digest_hex(&secret),
        hint: mask(&secret),
        models: request.models,
        group: request.group,
        token_quota: request.token_quota,
        period: request.period,
        hours: request.hours,
        created_ms: gw.scheduler.now().0,
        budget: request.budget,
        cache: request.cache,
        policies: request.policies,
    };
    (secret, key)
}

/// A key just made, as listed, with its secret this once.
async fn made(gw: Arc<Gateway>, name: KeyName, secret: String) -> Result<(StatusCode, Json<Value>), ApiError> {
    let mut shown = show(State(gw), Path(name.to_string())).await?.0;
    shown["key"] = json!(secret);
    shown["note"] = json!("the key is shown this once; only a digest of it is kept");
    Ok((StatusCode::CREATED, Json(shown)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyChange {
    models: Option<Vec<String>>,
    group: Option<GroupName>,
    token_quota: Option<u64>,
    period: Option<PeriodName>,
    hours: Option<u32>,
    /// A budget (`{"usd": "10", "period": "month"}`), or `null` to lift it.
    #[serde(default, deserialize_with = "present")]
    budget: Option<Value>,
}

/// A field that is present, `null` included (serde would read `null` as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `budget` of a change: absent → no change; `null` → none; else the budget.
fn budget_change(budget: Option<Value>) -> Result<Option<Option<Budget>>, ApiError> {
    match budget {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(v) => serde_json::from_value(v)
            .map(|b| Some(Some(b)))
            .map_err(|e| ApiError::invalid_request(format!("budget: {e}")).param("budget")),
    }
}

/// `PATCH /admin/api/keys/{name}`: scope and budget of any key; group and quota of runtime keys.
pub async fn update(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let change: KeyChange = body(&bytes)?;
    let budget = budget_change(change.budget)?;
    let key_name = KeyName::new(name.clone());
    gw.edit(|file, config| {
        if let Some(k) = file.keys.iter_mut().find(|k| k.name == key_name) {
            if let Some(budget) = budget {
                k.budget = budget;
            }
            if let Some(models) = change.models {
                k.models = models;
            }
            if let Some(group) = change.group {
                k.group = group;
            }
            if change.token_quota.is_some() {
                k.token_quota = change.token_quota;
            }
            if let Some(period) = change.period {
                k.period = period;
            }
            if change.hours.is_some() {
                k.hours = change.hours;
            }
            return Ok(());
        }
        if !config.keys.iter().any(|k| k.name == key_name) {
            return Err(not_found("key", &name));
        }
        if change.group.is_some() || change.token_quota.is_some() || change.period.is_some() || change.hours.is_some() {
            return Err(ApiError::invalid_request(format!(
                "key `{name}` comes from config.yaml: only its `models` scope can change here; edit config.yaml for the rest"
            )));
        }
        if let Some(models) = change.models {
            file.key_scopes.insert(key_name.clone(), models);
        }
        if let Some(budget) = budget {
            file.key_budgets.insert(key_name.clone(), budget);
        }
        Ok(())
    })
    .await?;
    show(State(gw), Path(name)).await
}

/// `DELETE /admin/api/keys/{name}`: the key stops working, and what it stored (its Responses
/// turns) is deleted with it.
pub async fn delete(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let key_name = KeyName::new(name.clone());
    let owner = gw
        .edit(|file, config| {
            if let Some(at) = file.keys.iter().position(|k| k.name == key_name) {
                return Ok(id_of_digest_hex(&file.keys.remove(at).key_sha256));
            }
            let Some(k) = config.keys.iter().find(|k| k.name == key_name) else {
                return Err(not_found("key", &name));
            };
            file.key_scopes.remove(&key_name);
            file.key_budgets.remove(&key_name);
            file.deleted_keys.push(key_name.clone());
            Ok(Some(id_of_secret(k.key.expose())))
        })
        .await?;
    if let Some(owner) = owner {
        gw.state.delete_owner_responses(&owner);
    }
    tracing::info!(key = %name, "admin deleted a key");
    Ok(StatusCode::NO_CONTENT)
}
