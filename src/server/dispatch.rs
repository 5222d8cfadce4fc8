//! The path every front door shares once it has a unified request: resolve the model to its
//! candidates, check scope and kind, and try them in the scheduler's order until one serves.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use tracing::Instrument;

use super::Gateway;
use super::auth::KeyEntry;
use super::error::ApiError;
use crate::config::ModelKind;
use crate::plugin::Operation;
use crate::provider::{AttemptError, ChunkStream, Target};
use crate::router::{self, Resolved};
use crate::scheduler::{self, Skipped, SlotKey, UnixMs};

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
    if resolved.is_empty() {
        if !key.scope.allows(&[call.model]) {
            return Err(not_allowed(call.model));
        }
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("model \"{}\" does not exist; GET /v1/models lists the models this key may use", call.model),
        )
        .code("model_not_found")
        .param("model"));
    }
    let allowed: Vec<Resolved> =
        resolved.into_iter().filter(|r| key.scope.allows(&[call.model, &r.qualified(), &r.model.name])).collect();
    if allowed.is_empty() {
        return Err(not_allowed(call.model));
    }
    let operation = match call.kind {
        ModelKind::Chat => Operation::Chat,
        ModelKind::Embedding => Operation::Embedding,
        ModelKind::Image => return Err(ApiError::invalid_request("image generation is not available yet")),
    };
    if allowed.iter().all(|r| r.model.kind != call.kind) {
        let wanted = format!("{:?}", call.kind).to_lowercase();
        return Err(ApiError::invalid_request(format!("model \"{}\" is not a {wanted} model", call.model))
            .param("model")
            .code("wrong_model_kind"));
    }
    let candidates: Vec<Resolved> = allowed.into_iter().filter(|r| r.model.kind == call.kind).collect();
    let (ordered, skipped) = gw.scheduler.order(candidates);

    let mut failed: Vec<(SlotKey, AttemptError)> = Vec::new();
    let mut busy: Vec<(SlotKey, u32)> = Vec::new();
    for candidate in ordered {
        let slot = SlotKey::of(&candidate.resolved);
        let Some(adapter) = gw.plugins.adapter(&candidate.resolved.source.adapter) else {
            gw.scheduler.release_probe(&slot);
            continue;
        };
        let Some(permit) = gw.provider.admit(candidate.resolved.source).await else {
            // Full for longer than its queue timeout: not a failure, just not available now.
            if candidate.probe {
                gw.scheduler.release_probe(&slot);
            }
            busy.push((slot, candidate.resolved.source.max_concurrent));
            continue;
        };
        let target = Target { source: candidate.resolved.source, model: candidate.resolved.model, adapter, operation };
        let source = &target.source.name;
        tracing::debug!(%source, upstream = target.model.upstream_name(), probe = candidate.probe, "attempt");
        let started = std::time::Instant::now();
        let outcome = if call.stream {
            // Fail over until the first chunk is in hand: before it, the client has seen nothing.
            match gw.provider.stream(&target, call.unified).await {
                Ok(chunks) => chunks.first_chunk().await.map(|c| Answer::Stream(c.holding(permit))),
                Err(e) => Err(e),
            }
        } else {
            gw.provider.complete(&target, call.unified).await.map(Answer::Complete)
        };
        let ms = started.elapsed().as_millis() as u64;
        match outcome {
            Ok(answer) => {
                gw.scheduler.record(&slot, candidate.probe, None);
                tracing::info!(%source, ms, probe = candidate.probe, after_failures = failed.len(), "answered");
                return Ok(answer);
            }
            Err(e) => match scheduler::classify(&e) {
                // The request itself is wrong: no other source would take it either.
                None => {
                    if candidate.probe {
                        gw.scheduler.release_probe(&slot);
                    }
                    return Err(ApiError::from(&e));
                }
                Some(failure) => {
                    tracing::warn!(%source, ms, "attempt failed, trying the next candidate: {e}");
                    gw.scheduler.record(&slot, candidate.probe, Some(failure));
                    failed.push((slot, e));
                }
            },
        }
    }
    Err(all_failed(call.model, failed, busy, skipped, gw.scheduler.now()))
}

fn not_allowed(model: &str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "model_not_allowed", format!("model \"{model}\" is not allowed for this key"))
}

/// The answer when no candidate served: the upstream's own error when it was the only one
/// tried and nothing else was waiting, otherwise 503 with what each candidate got.
fn all_failed(
    model: &str,
    mut failed: Vec<(SlotKey, AttemptError)>,
    busy: Vec<(SlotKey, u32)>,
    skipped: Vec<Skipped>,
    now: UnixMs,
) -> ApiError {
    if failed.len() == 1 && busy.is_empty() && skipped.is_empty() {
        return ApiError::from(&failed.remove(0).1);
    }
    let mut parts: Vec<String> = failed.iter().map(|(slot, e)| format!("{slot}: {e}")).collect();
    parts.extend(busy.iter().map(|(slot, max)| format!("{slot}: busy (all {max} of max_concurrent in use)")));
    parts.extend(skipped.iter().map(|s| match s.until {
        Some(until) => format!("{}: cooling down for another {} s", s.key, until.since(now).as_secs().max(1)),
        None => format!("{}: cooling down until cleared", s.key),
    }));
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "upstream_error",
        format!("no source could serve model \"{model}\": {}", parts.join("; ")),
    )
    .code("all_candidates_failed")
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
