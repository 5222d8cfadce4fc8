//! The path every front door shares once it has a unified request: resolve the model, check
//! the key's scope and the model's kind, and make the attempt through the source's adapter.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use tracing::Instrument;

use super::Gateway;
use super::auth::KeyEntry;
use super::error::ApiError;
use crate::config::ModelKind;
use crate::plugin::Operation;
use crate::provider::{ChunkStream, Target};
use crate::router;

/// What the upstream gave back, still in the unified form.
pub enum Answer {
    Complete(String),
    Stream(ChunkStream),
}

/// One unified request, ready to route.
pub struct Call<'a> {
    pub model: &'a str,
    /// Unified request JSON (OpenAI Chat Completions or Embeddings shape, by `kind`).
    pub unified: &'a str,
    pub stream: bool,
    /// The kind of model the endpoint serves.
    pub kind: ModelKind,
}

pub async fn dispatch(gw: &Gateway, key: &KeyEntry, call: Call<'_>) -> Result<Answer, ApiError> {
    let resolved = router::resolve(&gw.config, call.model);
    let allowed = match &resolved {
        Some(r) => key.scope.allows(&[call.model, &r.qualified(), &r.model.name]),
        None => key.scope.allows(&[call.model]),
    };
    if !allowed {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "model_not_allowed",
            format!("model \"{}\" is not allowed for this key", call.model),
        ));
    }
    let resolved = resolved.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("model \"{}\" does not exist; GET /v1/models lists the models this key may use", call.model),
        )
        .code("model_not_found")
        .param("model")
    })?;
    let operation = match call.kind {
        ModelKind::Chat => Operation::Chat,
        ModelKind::Embedding => Operation::Embedding,
        ModelKind::Image => return Err(ApiError::invalid_request("image generation is not available yet")),
    };
    if resolved.model.kind != call.kind {
        let wanted = format!("{:?}", call.kind).to_lowercase();
        return Err(ApiError::invalid_request(format!("model \"{}\" is not a {wanted} model", call.model))
            .param("model")
            .code("wrong_model_kind"));
    }
    let adapter = gw.plugins.adapter(&resolved.source.adapter).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "adapter_error",
            format!("adapter `{}` is not loaded", resolved.source.adapter),
        )
    })?;
    let target = Target { source: resolved.source, model: resolved.model, adapter, operation };
    let source = &resolved.source.name;
    tracing::debug!(%source, upstream = resolved.model.upstream_name(), stream = call.stream, "dispatching");

    let started = std::time::Instant::now();
    if call.stream {
        let chunks = gw.provider.stream(&target, call.unified).await.map_err(|e| ApiError::from(&e))?;
        tracing::info!(%source, first_byte_ms = started.elapsed().as_millis() as u64, "stream started");
        Ok(Answer::Stream(chunks))
    } else {
        let body = gw.provider.complete(&target, call.unified).await.map_err(|e| ApiError::from(&e))?;
        tracing::info!(%source, ms = started.elapsed().as_millis() as u64, "completed");
        Ok(Answer::Complete(body))
    }
}

/// How a front door names its request-id header and renders errors in its protocol.
pub struct FrontDoor {
    pub name: &'static str,
    pub id_header: &'static str,
    pub render_error: fn(ApiError) -> Response,
}

/// Runs one request under a fresh id and span: logs a refusal, renders it in the front
/// door's protocol, and stamps the id on the response.
pub async fn respond(door: FrontDoor, handle: impl Future<Output = Result<Response, ApiError>>) -> Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let span = tracing::info_span!("request", door = door.name, id = %id, key = tracing::field::Empty, model = tracing::field::Empty);
    let mut response = match handle.instrument(span.clone()).await {
        Ok(response) => response,
        Err(e) => {
            span.in_scope(|| {
                tracing::info!(status = e.status.as_u16(), kind = e.kind, "request refused: {}", e.message)
            });
            (door.render_error)(e)
        }
    };
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(door.id_header, value);
    }
    response
}
