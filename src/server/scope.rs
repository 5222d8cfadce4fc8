//! Which candidates a key may use for the model it asked for: resolution through the router,
//! then the key's model scope and the endpoint's model kind; the log's `mode` for each way.

use axum::http::StatusCode;

use super::auth::KeyEntry;
use super::books::LogMode;
use super::call::Call;
use super::error::{ApiError, ErrorType};
use crate::config::{ModelKind, RouteConfig};
use crate::router::{self, AUTO, Planned, Resolution};

/// The candidates `call.model` names that this key may use, of the endpoint's kind, the route
/// they came from, and how they were found (the log's `mode`).
pub fn plan_candidates<'a>(
    key: &KeyEntry,
    call: &Call<'a>,
) -> Result<(Option<&'a RouteConfig>, Vec<Planned<'a>>, LogMode), ApiError> {
    let model = call.model;
    match router::route(&call.runtime.config, model, call.kind, &key.group) {
        Resolution::Unknown => {
            if !key.scope.allows(&[model]) {
                return Err(not_allowed(model));
            }
            Err(ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorType::InvalidRequest,
                format!("model \"{model}\" does not exist; GET /v1/models lists the models this key may use"),
            )
            .code("model_not_found")
            .param("model"))
        }
        Resolution::Auto { candidates, fallback_from } => {
            if !key.scope.allows(&[AUTO]) {
                return Err(match fallback_from {
                    Some(x) => ApiError::new(
                        StatusCode::FORBIDDEN,
                        ErrorType::ModelNotAllowed,
                        format!("model \"{x}\" is not in this key's model scope, so it cannot use AUTO"),
                    ),
                    None => not_allowed(model),
                });
            }
            if candidates.is_empty() {
                let chain = if call.kind == ModelKind::Image { "auto_image" } else { "auto" };
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    ErrorType::InvalidRequest,
                    format!("model AUTO has no candidates: add slots to `{chain}` in the runtime file"),
                )
                .code("model_not_found")
                .param("model"));
            }
            Ok((None, candidates, LogMode::Auto))
        }
        Resolution::Route { route, candidates } => {
            if !key.scope.allows(&[model]) {
                return Err(not_allowed(model));
            }
            let of_kind: Vec<Planned> = candidates.into_iter().filter(|p| p.resolved.model.kind == call.kind).collect();
            if of_kind.is_empty() {
                return Err(wrong_kind(model, call.kind));
            }
            Ok((Some(route), of_kind, LogMode::of(&route.mode)))
        }
        Resolution::Named(resolved) => {
            let allowed: Vec<_> =
                resolved.into_iter().filter(|r| key.scope.allows(&[model, &r.qualified(), &r.model.name])).collect();
            if allowed.is_empty() {
                return Err(not_allowed(model));
            }
            if allowed.iter().all(|r| r.model.kind != call.kind) {
                return Err(wrong_kind(model, call.kind));
            }
            let planned = allowed
                .into_iter()
                .filter(|r| r.model.kind == call.kind)
                .map(|resolved| Planned { resolved, tier: 0, quota: None, price: None })
                .collect();
            Ok((None, planned, LogMode::Model))
        }
    }
}

/// What a request is labelled by in the metrics: what it resolved to, never the client's own
/// string — `AUTO` for the AUTO chain (a name nobody serves falling back to it included), the
/// configured model's name for a model (a `default_model` fallback included), the route's alias.
pub fn metric_label<'a>(call: &Call<'a>, mode: LogMode, candidates: &[Planned<'a>]) -> &'a str {
    match mode {
        LogMode::Auto => AUTO,
        LogMode::Model | LogMode::CountTokens => candidates.first().map_or(AUTO, |c| c.resolved.model.name.as_str()),
        LogMode::Direct | LogMode::AutoSelect | LogMode::Vision | LogMode::Fusion => call.model,
    }
}

fn wrong_kind(model: &str, kind: ModelKind) -> ApiError {
    let wanted = format!("{kind:?}").to_lowercase();
    ApiError::invalid_request(format!("model \"{model}\" is not a {wanted} model"))
        .param("model")
        .code("wrong_model_kind")
}

fn not_allowed(model: &str) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        ErrorType::ModelNotAllowed,
        format!("model \"{model}\" is not allowed for this key"),
    )
}
